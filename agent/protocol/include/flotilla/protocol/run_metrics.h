#pragma once
// Definitions derived from a run's records, written once and used by every
// program that shows them: the engine's own summary, `flotilla show`, the
// window's dashboard and the compare tables.

#include <cstdint>
#include <optional>
#include <vector>

namespace flotilla::metrics {

// How many of a run's first `steps` steps are warm-up and left out of its
// throughput: the first 10 % (rounded up), at least 5, but never every step
// (a run of 3 steps keeps its last one).
int64_t warmup_steps(int64_t steps);

// The median of `values` (the mean of the middle two for an even count);
// nullopt for none.
std::optional<double> median(std::vector<double> values);

// A run's throughput: the median of the job's samples/s over its steps after
// warm-up. `job_samples_per_s` holds one value per step, in step order (the
// lead rank's `samples_per_s`, which counts the samples of every data-parallel
// replica). nullopt for a run without steps.
std::optional<double> throughput(const std::vector<double>& job_samples_per_s);

// The values after warm-up of a per-step series, in step order.
std::vector<double> after_warmup(const std::vector<double>& per_step);

}  // namespace flotilla::metrics
