#include "flotilla/charts/transforms.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace flotilla::charts {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One pixel column's share of the points while decimating.
struct Column {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  size_t min_at = 0, max_at = 0;
  double sum = 0;
  size_t finite = 0;
  size_t first = 0, last = 0;  // the first and last point that fell here, for a mean's x
  bool any = false;

  void add(double y, size_t at) {
    if (!std::isfinite(y)) return;
    if (y < min) min = y, min_at = at;
    if (y > max) max = y, max_at = at;
    sum += y;
    ++finite;
  }
  void touch(size_t from, size_t to) {
    if (!any) first = from, any = true;
    last = to;
  }
};

}  // namespace

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
    std::vector<Column> cols(static_cast<size_t>(columns));
    const double width = (x1 - x0) / columns;
    auto column_of = [&](size_t i) {
      const double c = width > 0 ? (xs[i] - x0) / width : 0;
      return size_t(std::clamp(c, 0.0, double(columns - 1)));
    };
    // Blocks of at most half a column's points, so that each column reads
    // a few of them and a block rarely straddles two columns.
    const double per_column = double(count) / columns;
    int level = -1;
    while (level + 1 < int(levels_.size()) &&
           double(size_t{1} << (kFirstLevel + level + 1)) <= per_column / 2)
      ++level;
    size_t i = i0;
    if (level >= 0) {
      const size_t block = size_t{1} << (kFirstLevel + level);
      const auto& blocks = levels_[size_t(level)];
      for (; i < i1 && i % block != 0; ++i) {  // the unaligned start, point by point
        auto& c = cols[column_of(i)];
        c.add(ys[i], i);
        c.touch(i, i);
      }
      for (; i + block <= i1; i += block) {
        const Block& b = blocks[i / block];
        auto& c = cols[column_of(i)];
        c.touch(i, i + block - 1);
        if (!b.finite) continue;
        if (b.min < c.min) c.min = b.min, c.min_at = b.min_at;
        if (b.max > c.max) c.max = b.max, c.max_at = b.max_at;
        c.sum += b.sum;
        c.finite += b.finite;
      }
    }
    for (; i < i1; ++i) {
      auto& c = cols[column_of(i)];
      c.add(ys[i], i);
      c.touch(i, i);
    }
    for (const auto& c : cols) {
      if (!c.finite) continue;
      if (reduction == Reduction::mean) {
        out.push_back({(xs[c.first] + xs[c.last]) / 2, c.sum / double(c.finite)});
      } else if (c.min_at == c.max_at) {
        out.push_back({xs[c.min_at], c.min});
      } else if (c.min_at < c.max_at) {
        out.push_back({xs[c.min_at], c.min});
        out.push_back({xs[c.max_at], c.max});
      } else {
        out.push_back({xs[c.max_at], c.max});
        out.push_back({xs[c.min_at], c.min});
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
  if (low == high) {
    const double pad = low == 0 ? 1 : std::abs(low) * 0.1;
    return {low >= 0 && low - pad < 0 ? 0 : low - pad, high + pad};
  }
  const double pad = (high - low) * 0.05;
  // Quantities that cannot go below zero read best from zero when zero is near.
  if (low >= 0 && low <= (high - low)) return {0, high + pad};
  if (high <= 0 && -high <= (high - low)) return {low - pad, 0};
  return {low - pad, high + pad};
}

}  // namespace flotilla::charts
