// The charts' transforms on plain series: axis ranges, smoothing and the
// decimation that keeps a long series' extremes at any width.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "flotilla/charts/run_data.h"
#include "flotilla/charts/transforms.h"

namespace flotilla::charts {
namespace {

TEST(Transforms, AxisOfNearlyFlatValuesIsNotZoomedIntoTheirNoise) {
  // Two ranks' steady peak RSS in GiB, 4 kB apart: the axis spans tenths of
  // a GiB, not the 4 kB between them.
  const auto [low, high] = linear_axis_range(0.2696724, 0.2696762);
  EXPECT_LE(low, 0.25);
  EXPECT_GE(high, 0.29);
  // Values that do vary keep a tight range.
  const auto [vary_low, vary_high] = linear_axis_range(100, 110);
  EXPECT_GE(vary_low, 99.0);
  EXPECT_LE(vary_high, 111.0);
  EXPECT_EQ(linear_axis_range(0, 0), (std::pair<double, double>{0, 1}));
}

TEST(Transforms, SmoothingLeavesNonFiniteValuesOut) {
  const std::vector<double> values{1, kMissing, 3};
  const auto smoothed = smooth_ema(values, 0.5);
  EXPECT_DOUBLE_EQ(smoothed[0], 1);
  EXPECT_TRUE(std::isnan(smoothed[1]));
  EXPECT_DOUBLE_EQ(smoothed[2], (0.5 * 0.5 * 1 + 0.5 * 3) / (1 - 0.25));
  EXPECT_EQ(smooth_ema(values, 0).size(), 3u);
}

TEST(Transforms, DecimationKeepsEachColumnsExtremes) {
  auto x = std::make_shared<std::vector<double>>();
  auto y = std::make_shared<std::vector<double>>();
  for (int i = 0; i < 100000; ++i) x->push_back(i), y->push_back(std::sin(i * 0.001));
  (*y)[54321] = 50;  // a spike must survive
  const Pyramid pyramid(x, y);
  const auto points = pyramid.decimate(0, 99999, 500, Reduction::min_max);
  EXPECT_LE(points.size(), 1004u);
  EXPECT_GE(points.size(), 500u);
  EXPECT_TRUE(
      std::any_of(points.begin(), points.end(), [](const PlotPoint& p) { return p.y == 50; }));
  EXPECT_TRUE(std::is_sorted(points.begin(), points.end(),
                             [](const PlotPoint& a, const PlotPoint& b) { return a.x < b.x; }));
}

// Every pixel column of a decimated range keeps its lowest and highest
// value (at their own x), for ranges that start and end anywhere, with
// values missing here and there: checked against every point of every column.
TEST(Transforms, DecimationKeepsEveryPixelColumnsMinAndMax) {
  constexpr int kPoints = 200000;
  auto x = std::make_shared<std::vector<double>>();
  auto y = std::make_shared<std::vector<double>>();
  uint64_t state = 12345;  // a fixed LCG: the same values every run
  for (int i = 0; i < kPoints; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x->push_back(i);
    y->push_back(i % 1009 == 0 ? kMissing
                               : std::sin(i * 0.0003) + double(state >> 40) / double(1 << 24));
  }
  const Pyramid pyramid(x, y);
  struct Range {
    double x0;
    int columns;
    double width;  // a whole number, so that column edges are exact
  };
  for (const Range r : {Range{0, 500, 400}, Range{12345, 321, 77}, Range{99, 1000, 37},
                        Range{150001, 900, 55}, Range{7, 64, 3000}}) {
    const double x1 = r.x0 + r.columns * r.width;
    SCOPED_TRACE("x " + std::to_string(r.x0) + ".." + std::to_string(x1) + " in " +
                 std::to_string(r.columns) + " columns");
    const auto points = pyramid.decimate(r.x0, x1, r.columns, Reduction::min_max);
    EXPECT_LE(points.size(), size_t(2 * r.columns + 2));
    for (int c = 0; c < r.columns; ++c) {
      const double from = r.x0 + c * r.width, to = from + r.width;
      double low = std::numeric_limits<double>::infinity(), high = -low;
      for (int i = int(from); i < int(to) && i < kPoints; ++i)
        if (std::isfinite((*y)[size_t(i)]))
          low = std::min(low, (*y)[size_t(i)]), high = std::max(high, (*y)[size_t(i)]);
      if (c + 1 == r.columns && x1 < kPoints && std::isfinite((*y)[size_t(x1)]))
        low = std::min(low, (*y)[size_t(x1)]), high = std::max(high, (*y)[size_t(x1)]);
      if (!std::isfinite(low)) continue;
      const bool last = c + 1 == r.columns;
      auto kept = [&](double value) {
        return std::any_of(points.begin(), points.end(), [&](const PlotPoint& p) {
          return p.y == value && p.x >= from && (p.x < to || (last && p.x <= to));
        });
      };
      EXPECT_TRUE(kept(low)) << "column " << c << " lost its min " << low;
      EXPECT_TRUE(kept(high)) << "column " << c << " lost its max " << high;
    }
  }
}

}  // namespace
}  // namespace flotilla::charts
