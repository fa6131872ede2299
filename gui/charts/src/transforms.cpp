#include "flotilla/charts/transforms.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace flotilla::charts {
// What a range of points holds, as a pixel column needs it.
struct Pyramid::Summary {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  size_t min_at = 0, max_at = 0;
  double sum = 0;
  size_t finite = 0;
  size_t first = 0, last = 0;  // the column's first and last point, for a mean's x

  void add(double y, size_t at) {
    if (!std::isfinite(y)) return;
    if (y < min) min = y, min_at = at;
    if (y > max) max = y, max_at = at;
    sum += y;
    ++finite;
  }
};

std::vector<double> smooth_ema(const std::vector<double>& values, double weight) {
  weight = std::clamp(weight, 0.0, 0.999);
  if (weight == 0 || values.empty()) return values;
  // A constant series stays exactly constant (as in TensorBoard), rather
  // than wobbling in the last bits.
  bool constant = true;
  for (double v : values) constant = constant && (v == values.front());
  if (constant) return values;
  std::vector<double> out(values.size());
  double last = 0;
  int64_t accumulated = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double y = values[i];
    if (!std::isfinite(y)) {
      out[i] = y;
      continue;
    }
    last = last * weight + (1 - weight) * y;
    ++accumulated;
    out[i] = last / (1 - std::pow(weight, double(accumulated)));
  }
  return out;
}

Pyramid::Pyramid(std::shared_ptr<const std::vector<double>> x,
                 std::shared_ptr<const std::vector<double>> y)
    : x_(std::move(x)), y_(std::move(y)) {
  const auto& ys = *y_;
  const size_t n = std::min(x_->size(), ys.size());
  size_t block = size_t{1} << kFirstLevel;
  std::vector<Block> level;
  level.reserve(n / block + 1);
  for (size_t begin = 0; begin < n; begin += block) {
    Block b;
    b.min = std::numeric_limits<double>::infinity();
    b.max = -b.min;
    for (size_t i = begin; i < std::min(begin + block, n); ++i) {
      const double v = ys[i];
      if (!std::isfinite(v)) continue;
      if (v < b.min) b.min = v, b.min_at = uint32_t(i);
      if (v > b.max) b.max = v, b.max_at = uint32_t(i);
      b.sum += v;
      ++b.finite;
    }
    level.push_back(b);
  }
  while (level.size() > 1) {
    std::vector<Block> up;
    up.reserve(level.size() / 2 + 1);
    for (size_t i = 0; i < level.size(); i += 2) {
      Block b = level[i];
      if (i + 1 < level.size()) {
        const Block& o = level[i + 1];
        if (o.finite) {
          if (!b.finite || o.min < b.min) b.min = o.min, b.min_at = o.min_at;
          if (!b.finite || o.max > b.max) b.max = o.max, b.max_at = o.max_at;
          b.sum += o.sum;
          b.finite += o.finite;
        }
      }
      up.push_back(b);
    }
    levels_.push_back(std::move(level));
    level = std::move(up);
  }
  levels_.push_back(std::move(level));
}

int64_t Pyramid::index_at(double x) const {
  if (!x_ || x_->empty()) return -1;
  const auto& xs = *x_;
  int64_t i = int64_t(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin()) - 1;
  for (; i >= 0; --i)
    if (std::isfinite((*y_)[size_t(i)])) return i;
  return -1;
}

Pyramid::Summary Pyramid::summarise(size_t begin, size_t end) const {
  Summary column;
  column.first = begin;
  column.last = end - 1;
  const auto& ys = *y_;
  const int largest = kFirstLevel + int(levels_.size()) - 1;  // log2 of the top level's blocks
  size_t i = begin;
  while (i < end) {
    // The largest block that starts at i (its size divides i) and ends
    // within the range, found in O(1): the range is read as a segment tree
    // reads it, a few raw points at each end and at most two blocks a level
    // between them.
    const int aligned = i == 0 ? 63 : __builtin_ctzll(i);
    const int fits = 63 - __builtin_clzll(end - i);
    const int k = std::min({aligned, fits, largest});
    if (k < kFirstLevel) {
      column.add(ys[i], i);
      ++i;
      continue;
    }
    const Block& b = levels_[size_t(k - kFirstLevel)][i >> k];
    i += size_t{1} << k;
    if (!b.finite) continue;
    if (b.min < column.min) column.min = b.min, column.min_at = b.min_at;
    if (b.max > column.max) column.max = b.max, column.max_at = b.max_at;
    column.sum += b.sum;
    column.finite += b.finite;
  }
  return column;
}

std::vector<PlotPoint> Pyramid::decimate(double x0, double x1, int columns,
                                         Reduction reduction) const {
  std::vector<PlotPoint> out;
  const size_t n = size();
  if (n == 0 || !(x1 >= x0)) return out;
  columns = std::max(columns, 1);
  const auto& xs = *x_;
  const auto& ys = *y_;
  const size_t i0 = size_t(std::lower_bound(xs.begin(), xs.end(), x0) - xs.begin());
  const size_t i1 = size_t(std::upper_bound(xs.begin(), xs.end(), x1) - xs.begin());
  // The nearest finite point outside each end, so that lines reach the edges.
  auto outside = [&](size_t from, int step) -> std::optional<size_t> {
    for (int64_t i = int64_t(from); i >= 0 && i < int64_t(n); i += step)
      if (std::isfinite(ys[size_t(i)])) return size_t(i);
    return std::nullopt;
  };
  if (i0 > 0)
    if (auto before = outside(i0 - 1, -1)) out.push_back({xs[*before], ys[*before]});
  const size_t count = i1 > i0 ? i1 - i0 : 0;
  const bool raw = count <= size_t(2 * columns);
  if (raw) {
    for (size_t i = i0; i < i1; ++i)
      if (std::isfinite(ys[i])) out.push_back({xs[i], ys[i]});
  } else {
    // Column c holds the points with x in [x0 + c w, x0 + (c + 1) w), the
    // last one x1 too; each column is summarised over exactly its points, so
    // that its lowest and highest value are kept wherever they fall.
    const double width = (x1 - x0) / columns;
    size_t a = i0;
    for (int c = 0; c < columns && a < i1; ++c) {
      const size_t b =
          c + 1 == columns
              ? i1
              : size_t(std::lower_bound(xs.begin() + std::ptrdiff_t(a),
                                        xs.begin() + std::ptrdiff_t(i1), x0 + width * (c + 1)) -
                       xs.begin());
      if (b == a) continue;
      const Summary col = summarise(a, b);
      a = b;
      if (!col.finite) continue;
      if (reduction == Reduction::mean) {
        out.push_back({(xs[col.first] + xs[col.last]) / 2, col.sum / double(col.finite)});
      } else if (col.min_at == col.max_at) {
        out.push_back({xs[col.min_at], col.min});
      } else if (col.min_at < col.max_at) {
        out.push_back({xs[col.min_at], col.min});
        out.push_back({xs[col.max_at], col.max});
      } else {
        out.push_back({xs[col.max_at], col.max});
        out.push_back({xs[col.min_at], col.min});
      }
    }
  }
  if (i1 < n)
    if (auto after = outside(i1, +1)) out.push_back({xs[*after], ys[*after]});
  return out;
}

std::pair<double, double> log_axis_range(double low, double high) {
  if (!(low > 0) || !(high > 0)) return {1, 10};
  double from = std::pow(10.0, std::floor(std::log10(low)));
  double to = std::pow(10.0, std::ceil(std::log10(high)));
  if (to <= from) to = from * 10;
  return {from, to};
}

std::pair<double, double> linear_axis_range(double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high)) return {0, 1};
  if (low > high) std::swap(low, high);
  // Values that differ by less than a thousandth of their size (two ranks'
  // steady peak RSS, 0.2696724 and 0.2696762 GiB) are drawn as flat, not
  // zoomed into a range of a few bytes whose ticks read as noise.
  const double magnitude = std::max(std::abs(low), std::abs(high));
  if (high - low <= magnitude * 1e-3) {
    const double pad = magnitude == 0 ? 1 : magnitude * 0.1;
    return {low >= 0 && low - pad < 0 ? 0 : low - pad, high + pad};
  }
  const double pad = (high - low) * 0.05;
  // Quantities that cannot go below zero read best from zero when zero is near.
  if (low >= 0 && low <= (high - low)) return {0, high + pad};
  if (high <= 0 && -high <= (high - low)) return {low - pad, 0};
  return {low - pad, high + pad};
}

}  // namespace flotilla::charts
