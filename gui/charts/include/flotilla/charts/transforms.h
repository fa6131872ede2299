#pragma once
// What happens to a series between its values and its pixels: smoothing as
// TensorBoard does it, per-pixel-column decimation (through a min/max
// pyramid, so that a redraw costs the plot's width and not the series'
// length), and the rules of a logarithmic y axis. No Qt Widgets here.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace flotilla::charts {

// TensorBoard's debiased exponential moving average: last = last * w +
// (1 - w) * y, shown as last / (1 - w^n) after n finite values, so that the
// first points are not pulled towards 0. `weight` 0 returns `values`
// unchanged; non-finite values stay as they are and do not enter the
// average. `weight` is clamped to 0..0.999.
std::vector<double> smooth_ema(const std::vector<double>& values, double weight);

// A point of a decimated series.
struct PlotPoint {
  double x = 0;
  double y = 0;
};

enum class Reduction {
  min_max,  // each pixel column keeps its lowest and highest value, in x order (lines: spikes stay)
  mean,     // each pixel column keeps its mean (stacked areas: sums of means stay consistent)
};

// A series' values summarised over blocks of 2^k points, for every k from
// kFirstLevel up, so that a view of any x range at any width is decimated
// by reading about two blocks per pixel column. `x` must be non-decreasing;
// non-finite y values are left out of every block.
class Pyramid {
 public:
  Pyramid() = default;
  Pyramid(std::shared_ptr<const std::vector<double>> x,
          std::shared_ptr<const std::vector<double>> y);

  size_t size() const { return x_ ? x_->size() : 0; }
  const std::vector<double>& x() const { return *x_; }
  const std::vector<double>& y() const { return *y_; }

  // The points of [x0, x1] reduced to `columns` pixel columns of equal width
  // w = (x1 - x0) / columns, column c holding the points with x in
  // [x0 + c w, x0 + (c + 1) w) (the last one x1 too): min_max keeps each
  // column's lowest and highest point (two points at most, in x order), mean
  // one point at its mean. The nearest point outside each end comes too, so
  // that a line runs on to the plot's edge. A range holding no more than two
  // points a column comes back as it is. Costs O(columns log n), not O(n).
  std::vector<PlotPoint> decimate(double x0, double x1, int columns, Reduction reduction) const;
  // The index of the last point with a finite y at or before `x`; -1 when
  // there is none.
  int64_t index_at(double x) const;

  static constexpr int kFirstLevel = 3;  // blocks of 8: below that the raw points are read

 private:
  struct Summary;
  // The lowest, highest and sum of the points [begin, end): a few raw points
  // at each end and at most two blocks a level between them.
  Summary summarise(size_t begin, size_t end) const;

  struct Block {
    double min = 0, max = 0, sum = 0;
    uint32_t min_at = 0, max_at = 0;  // index of the extreme point, for its x
    uint32_t finite = 0;
  };
  std::shared_ptr<const std::vector<double>> x_, y_;
  std::vector<std::vector<Block>> levels_;  // levels_[i] has blocks of 2^(kFirstLevel + i) points
};

// A logarithmic axis shows positive values only.
inline bool shown_on_log_axis(double y) {
  return y > 0;
}
// The range a logarithmic axis spans for data from `low` to `high` (both
// positive): whole decades around them, so that the ticks are 1, 10, 100.
std::pair<double, double> log_axis_range(double low, double high);
// A linear axis range with a little room above and below; [0, max] when all
// values are of one sign and near zero is within reach; 10 % of their size
// around values that are flat to a thousandth.
std::pair<double, double> linear_axis_range(double low, double high);

}  // namespace flotilla::charts
