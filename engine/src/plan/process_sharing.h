#pragma once
// Core sharing measured as ranks share a machine: as separate processes.
// Two threads of one process, each passing the same weights forward and
// backward, slowed each other 1.0-1.1x on the test bed's two cores where two
// single-threaded ranks trained 1.2-1.5x slower than one (docs/predict.md):
// a rank has its own copy of the weights and gradients, its data loader and
// its record writer beside its compute. So the prediction starts the engine
// itself: n one-rank trainings of the run's model at once, against one alone.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

// What one rank of `config` computes, as a run of its own: the model, data,
// optimizer, precision and freezing of `config`, one rank on this machine
// with `threads` threads, a batch of `micro_batch`, `steps` steps (however
// small its data set), and no
// communication, codec, checkpoints or elastic moves.
ExperimentConfig one_rank_alone(const ExperimentConfig& config, int64_t micro_batch,
                                int64_t threads, int64_t steps);

// The compute time of a step (forward, backward and optimizer, the step
// records' own timings) with n of `rank_config`'s trainings running at once
// over that of one alone, for n = 1..max_at_once (the first is 1). Each is
// `engine` (flotilla-train) started with `rank_config`; the steps counted are
// those every one of the n made while all were training (a step record's
// arrival), after each one's first. Throws std::runtime_error naming the
// engine's own words when a training fails, or after `timeout_s`.
std::vector<double> measure_core_sharing_in_processes(const std::filesystem::path& engine,
                                                      const ExperimentConfig& rank_config,
                                                      int64_t max_at_once, double timeout_s = 120);

}  // namespace flotilla
