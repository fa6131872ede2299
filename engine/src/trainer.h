#pragma once
// The single-process training loop: one rank, one device.

#include <torch/torch.h>

#include <memory>

#include "comm/communicator.h"
#include "comm/gradient_buckets.h"
#include "data/batch_loader.h"
#include "data/dataset.h"
#include "flotilla/engine/training.h"
#include "metrics/phase_timer.h"

namespace flotilla {

class Trainer {
 public:
  explicit Trainer(const TrainOptions& options);
  // Runs every epoch (or up to max_steps); throws on failure.
  TrainResult run();

 private:
  struct PendingStep {
    records::Step record;
    torch::Tensor loss;
    CommStats comm;
  };

  void train_epoch(int64_t epoch);
  void step(data::Batch batch, int64_t epoch);
  // Emits the record of a step whose times have become known.
  void finish_step(PendingStep& pending, const PhaseTimes& times);
  double evaluate();
  // hits / count, each summed over every rank (hits on the device, count on the host).
  double fraction_over_ranks(const torch::Tensor& hits, int64_t count);
  double learning_rate(int64_t epoch) const;
  void emit(const std::string& line);
  bool done() const;

  const TrainOptions& options_;
  const ExperimentConfig& config_;
  torch::Device device_;
  data::Dataset dataset_;
  torch::nn::Sequential model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<data::BatchLoader> train_loader_, test_loader_;
  std::unique_ptr<PhaseTimer> timer_;
  std::unique_ptr<Communicator> comm_;                // null on one rank
  std::unique_ptr<GradientBuckets> buckets_;          // ddp: all-reduce overlapping backward
  std::optional<std::pair<int64_t, int64_t>> fault_;  // (rank, step) to fail at, for tests

  int64_t global_step_ = 0;
  int64_t total_steps_ = 0;
  std::optional<PendingStep> pending_;
  // Per-epoch sums; correct predictions stay on the device until the epoch ends.
  torch::Tensor epoch_correct_;
  int64_t epoch_samples_ = 0;
  double epoch_loss_sum_ = 0;
  int64_t epoch_loss_count_ = 0;
  // Run totals over measured steps, the first (warm-up) step excluded.
  PhaseTimes totals_;
  int64_t measured_steps_ = 0;
  int64_t measured_samples_ = 0;
  TrainResult result_;
};

}  // namespace flotilla
