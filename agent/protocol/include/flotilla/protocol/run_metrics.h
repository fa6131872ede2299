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

// One step of the lead rank as its record has it: the job's samples in it
// (every data-parallel replica's) and `samples_per_s`, which is samples over
// the step's wall time (from its start to the next step's start: the data
// wait, the step, and its record).
struct StepWork {
  double samples = 0;
  double samples_per_s = 0;
};

// A run's throughput: the work of its steady state over the wall time it
// took, Σ samples / Σ (samples / samples_per_s) over the steps after warm-up
// (in step order; a step without a rate is left out of both sums). So the
// time a fixed amount of work W takes in that window is W / throughput, and
// the speed-up T(1)/T(N) of two runs is the ratio of their throughputs: one
// definition for compare, the studies, the window and the engine's summary.
// A ratio of sums rather than a median of per-step rates: slow steps cost
// wall time, and a median would leave them out. nullopt for a run without
// steps or without time.
std::optional<double> throughput(const std::vector<StepWork>& steps);

// The values after warm-up of a per-step series, in step order.
std::vector<double> after_warmup(const std::vector<double>& per_step);

}  // namespace flotilla::metrics
