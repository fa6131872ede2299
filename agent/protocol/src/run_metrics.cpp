#include "flotilla/protocol/run_metrics.h"

#include <algorithm>
#include <cmath>

namespace flotilla::metrics {

int64_t warmup_steps(int64_t steps) {
  if (steps <= 1) return 0;
  const int64_t tenth = (steps + 9) / 10;
  return std::min(std::max<int64_t>(5, tenth), steps - 1);
}

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  const double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + middle);
  return (lower + upper) / 2.0;
}

std::vector<double> after_warmup(const std::vector<double>& per_step) {
  const auto skip = warmup_steps(static_cast<int64_t>(per_step.size()));
  return {per_step.begin() + skip, per_step.end()};
}

std::optional<double> throughput(const std::vector<StepWork>& steps) {
  const auto skip = warmup_steps(static_cast<int64_t>(steps.size()));
  double samples = 0, seconds = 0;
  for (auto s = steps.begin() + skip; s != steps.end(); ++s) {
    if (!(s->samples > 0) || !(s->samples_per_s > 0) || !std::isfinite(s->samples) ||
        !std::isfinite(s->samples_per_s))
      continue;
    samples += s->samples;
    seconds += s->samples / s->samples_per_s;
  }
  if (!(seconds > 0)) return std::nullopt;
  return samples / seconds;
}

}  // namespace flotilla::metrics
