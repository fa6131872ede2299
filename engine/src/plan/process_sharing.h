#pragma once
// Core sharing measured as ranks share a machine: as separate processes.
// A rank has its own copy of the weights and gradients, its data loader and
// its record writer beside its compute, which threads of the planner that
// share one model do not; so the prediction starts the engine itself: n
// one-rank trainings of the run's model at once, against one alone. (On the
// test bed this gives 1.04-1.08x for two at once, about what threads gave:
// the rest of what two ranks lose there is not compute, docs/predict.md.)

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

// What one rank of `config` computes, as a run of its own: the model, data,
// optimizer, precision and freezing of `config`, one rank on this machine
// with `threads` threads, a batch of `micro_batch`, `steps` steps (however
// small its data set), and no communication, codec, checkpoints or elastic
// moves.
ExperimentConfig one_rank_alone(const ExperimentConfig& config, int64_t micro_batch,
                                int64_t threads, int64_t steps);

// The compute time of a step (forward, backward and optimizer, the step
// records' own timings) with n of `rank_config`'s trainings running at once
// over that of one alone, for n = 1..max_at_once (the first is 1). Each is
// `engine` (flotilla-train) started with `rank_config`, all of them kept
// training until each has made rank_config.max_steps steps while all were
// (after each one's first, which warms up); their mean compute time counts.
// Throws std::runtime_error naming the engine's own words when a training
// fails, or after `timeout_s`.
std::vector<double> measure_core_sharing_in_processes(const std::filesystem::path& engine,
                                                      const ExperimentConfig& rank_config,
                                                      int64_t max_at_once, double timeout_s = 120);

}  // namespace flotilla
