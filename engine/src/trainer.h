#pragma once
// One rank's training loop, for every strategy: a whole model (single, ddp)
// or one pipeline stage (pipeline, pipeline_ddp), with progressive freezing.

#include <torch/torch.h>

#include <map>
#include <memory>

#include "checkpoint/checkpoint_folder.h"
#include "comm/communicator.h"
#include "comm/gradient_buckets.h"
#include "data/batch_loader.h"
#include "data/dataset.h"
#include "flotilla/engine/training.h"
#include "flotilla/protocol/run_metrics.h"
#include "freeze/freezer.h"
#include "freeze/prefix_cache.h"
#include "metrics/phase_timer.h"
#include "optim/multi_tensor_optimizer.h"
#include "pipeline/elastic_plan.h"
#include "pipeline/pipeline.h"
#include "precision/mixed_precision.h"
#include "strategy/data_parallel.h"

namespace flotilla {

class Trainer {
 public:
  explicit Trainer(const TrainOptions& options);
  // Runs every epoch (or up to max_steps); throws on failure.
  TrainResult run();

 private:
  struct PendingStep {
    records::Step record;
    torch::Tensor loss;  // undefined where this rank computes none
    CommStats comm;
    LinkStats link;
    std::chrono::steady_clock::time_point started;  // when the step began, data included
    double wall_ms = 0;  // from its start to the next step's (or to the epoch's end)
  };

  void set_up_pipeline(torch::nn::Sequential full_model, int64_t stages);
  // The group's rank 0 parameters and buffers to every member.
  void broadcast_state(Communicator& group);
  // The epoch's batches from `first_batch` on (above 0 only when resumed).
  // True when a checkpoint fell due at its last batch: it is saved after the
  // epoch's record, at the start of the next epoch.
  bool train_epoch(int64_t epoch, int64_t first_batch);
  void step(data::Batch batch, int64_t epoch);
  // Emits the record of a step whose times have become known.
  void finish_step(PendingStep& pending, const PhaseTimes& times);
  double evaluate();
  // hits / count, each summed over every rank (hits on the device, count on the host).
  double fraction_over_ranks(const torch::Tensor& hits, double count);
  double learning_rate(int64_t epoch) const;
  void emit(const std::string& line);
  bool done() const;

  // Checkpoints (config save): whether one is due after this step, the same
  // answer on every rank; writing this rank's part, to continue at batch
  // `next_batch` of `epoch`; the newest step every rank holds (0: none);
  // taking this rank's part of it back.
  bool checkpoint_due();
  void save_checkpoint(int64_t epoch, int64_t next_batch);
  int64_t newest_common_checkpoint();
  void restore_checkpoint(int64_t step);
  // The step record still waiting for its times, emitted now with what is known.
  void finish_pending_step();

  // Freezing: the frozen prefix for the coming step, and AutoFreeze's look
  // at the gradients after a step.
  void apply_freezing(int64_t frozen);
  // The frozen prefix on this rank's blocks as they are now: gradients
  // stopped, the pipeline and the prefix cache told.
  void place_frozen_prefix();

  // elastic.pipe (trainer_elastic.cpp): before the epoch's batch
  // `next_batch`, once the frozen prefix has grown, the layout AutoPipe
  // picks; a new one is taken at once, on every rank alike.
  void consider_transition(int64_t epoch, int64_t next_batch);
  void transition(const ElasticLayout& next, int64_t epoch, int64_t next_batch);
  // Each block's parameters, buffers and optimizer state from the rank that
  // trained it (replica 0's) to every rank; the optimizer state is kept in
  // `moved` by parameter until the new optimizer takes it. Returns the bytes received.
  int64_t share_trained_state(
      const ElasticLayout& from,
      std::map<const void*, optim::MultiTensorOptimizer::ParameterState>& moved);
  // The training and evaluation loaders of replica `replica` of `replicas`,
  // `batch_size` samples a step, the training one from batch `next_batch` of `epoch`.
  void rebuild_loaders(int64_t replica, int64_t replicas, int64_t batch_size, int64_t epoch,
                       int64_t next_batch);
  // Training mode for the blocks that train; with elastic.cache, evaluation
  // mode for the frozen ones, which are then one fixed function of a sample.
  void set_training_mode();
  // elastic.cache: the output of this rank's cached leading blocks for the
  // batch (`inputs` on the device): read when every sample of it is cached,
  // else computed and kept. Counts what was read in cached_samples_.
  torch::Tensor through_cached_prefix(const torch::Tensor& inputs, const torch::Tensor& indices);
  void observe_gradients();
  // Data-parallel averaging of the trainable parameters' gradients, rebuilt
  // when the set of trainable parameters changes.
  void rebuild_buckets();

  bool computes_loss() const { return !pipeline_ || pipeline_->plan().is_last(); }
  // The batch as the model takes it: NHWC with channels_last.
  torch::Tensor model_input(const torch::Tensor& inputs) const;
  // fp16: unscales the gradients; false (on every rank alike) when one is not
  // finite, and the optimizer step is to be skipped.
  bool unscale_gradients();

  const TrainOptions& options_;
  const ExperimentConfig& config_;
  torch::Device device_;
  torch::ScalarType compute_dtype_;   // autocast's: float32 (none), bfloat16 or float16
  torch::ScalarType gradient_dtype_;  // what gradient buckets are all-reduced in
  LossScaler scaler_;                 // fp16's; disabled otherwise
  data::Dataset dataset_;
  torch::nn::Sequential full_model_;  // every block, as every rank builds it
  torch::nn::Sequential model_;       // this rank's blocks: the whole model, or its stage
  int64_t first_block_ = 0;           // index of model_'s first block in the whole model
  int64_t replicas_ = 1;              // data-parallel copies of the model over the world
  int64_t total_blocks_ = 0;          // of the whole model
  int64_t frozen_applied_ = 0;        // leading blocks of the whole model frozen so far
  std::unique_ptr<optim::MultiTensorOptimizer> optimizer_;
  std::unique_ptr<data::BatchLoader> train_loader_, test_loader_;
  std::unique_ptr<PhaseTimer> timer_;
  std::unique_ptr<Communicator> comm_;          // null on one rank
  std::unique_ptr<Communicator> replica_comm_;  // pipeline_ddp: this stage in every replica
  Communicator* gradient_comm_ = nullptr;       // the group that averages gradients, if any
  std::unique_ptr<GradientBuckets> buckets_;    // all-reduce overlapping backward
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<DataParallel> data_parallel_;  // dp: one process, every visible GPU
  std::unique_ptr<Freezer> freezer_;
  // elastic.cache, on the rank holding the model's first block: the frozen
  // prefix's outputs per training sample.
  std::unique_ptr<PrefixCache> prefix_cache_;
  int64_t cached_samples_ = 0;                        // this step's
  std::optional<std::pair<int64_t, int64_t>> fault_;  // (rank, step) to fail at, for tests

  // elastic.pipe: what AutoPipe decides by, and the layout it is in.
  struct Elastic {
    std::vector<BlockCost> costs;  // rank 0's measurement, on every rank
    double budget_ms = 0;          // the slowest stage as the run started
    ElasticLayout layout;
    int64_t started_replicas = 1;    // config.batch_size is each one's batch
    int64_t decided_for_frozen = 0;  // the frozen prefix the layout was last decided for
    int64_t transitions = 0;
    torch::Tensor shape_example;         // one sample, to find the boundary shapes of a new cut
    std::optional<int64_t> killed_rank;  // FLOTILLA_FAULT=RANK:transition, for tests
  };
  std::optional<Elastic> elastic_;

  std::unique_ptr<checkpoint::CheckpointFolder> checkpoints_;
  std::chrono::steady_clock::time_point last_save_;
  int64_t start_epoch_ = 0;  // where a resumed run goes on
  int64_t start_batch_ = 0;
  int64_t resumed_from_ = 0;  // the checkpoint's step; 0: not resumed

  std::chrono::steady_clock::time_point step_started_;
  int64_t global_step_ = 0;
  int64_t total_steps_ = 0;
  std::optional<PendingStep> pending_;
  // Per-epoch sums; correct predictions stay on the device until the epoch ends.
  torch::Tensor epoch_correct_;
  int64_t epoch_samples_ = 0;  // this rank's (its replica's) samples stepped
  // Samples this rank computed the loss of (an elastic pipeline's last stage
  // changes ranks), and samples stepped by every replica.
  int64_t epoch_scored_samples_ = 0;
  int64_t epoch_global_samples_ = 0;
  double epoch_loss_sum_ = 0;
  int64_t epoch_loss_count_ = 0;
  // Run totals over measured steps, the first (warm-up) step excluded.
  PhaseTimes totals_;
  int64_t measured_steps_ = 0;
  std::vector<metrics::StepWork> step_work_;  // every step's, for the run's throughput
  TrainResult result_;
};

}  // namespace flotilla
