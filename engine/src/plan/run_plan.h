#pragma once
// The plan of a run (see flotilla/engine/plan.h) as data, computed with the
// functions the training ranks use: the model factory, stage cutting and
// boundary shapes, gradient bucketing, the codec's payload size, freezing
// and the protocol's rank placement.

#include <cstdint>
#include <optional>
#include <string>

#include <vector>

#include "flotilla/engine/plan.h"
#include "flotilla/protocol/rank_placement.h"
#include "pipeline/elastic_plan.h"
#include "plan/step_prediction.h"

namespace flotilla {

struct BlockPlan {
  int64_t index = 0;
  std::string name;  // as the model names it ("stem", "layer1_0", "head")
  std::string kind;  // its module class ("ConvBnRelu", "EncoderLayer")
  int64_t parameters = 0;
  int64_t trainable = 0;  // parameters that train at the first step (freezing leaves some out)
};

// All-reduce of one stage's gradients among its replicas (ddp: the whole model's among every rank).
struct AllreducePlan {
  int64_t ranks = 0;                  // P, the group's size
  std::vector<int64_t> bucket_bytes;  // in launch order
  // Per bucket, the block (of the group's blocks) whose gradients close it:
  // its lowest, as backward runs the blocks in reverse.
  std::vector<int64_t> bucket_closing_block;
  int64_t bytes_per_step = 0;  // what a step record reports (4, or 2 in bf16/fp16, x trainable)
};

struct StagePlan {
  int64_t stage = 0;
  int64_t first_block = 0;
  int64_t blocks = 0;
  int64_t parameters = 0;
  int64_t trainable = 0;
  std::optional<AllreducePlan> allreduce;
  // What each rank of this stage records per full step as bytes_sent and
  // bytes_recv: point-to-point payloads of every micro-batch plus all-reduces.
  int64_t bytes_sent_per_step = 0;
  int64_t bytes_recv_per_step = 0;
};

// One direction across a pipeline boundary, per micro-batch and per step.
struct TransferPlan {
  bool sent = true;        // gradients: false while every block before the boundary is frozen
  int64_t fp32_bytes = 0;  // of one full micro-batch
  int64_t wire_bytes = 0;  // after the codec (without one: in the compute dtype)
  int64_t fp32_bytes_per_step = 0;  // over every micro-batch of a step
  int64_t wire_bytes_per_step = 0;
};

struct BoundaryPlan {
  int64_t boundary = 0;               // between stage `boundary` and `boundary + 1`
  std::vector<int64_t> sample_shape;  // per sample, found by running a sample through the model
  std::vector<int64_t> shape;         // per full micro-batch
  int64_t elements = 0;               // of that tensor
  TransferPlan activations, gradients;
};

// elastic.pipe: a layout the pipeline changes to once `frozen_blocks` are
// frozen (at `at_step` on a fixed schedule; -1: whenever AutoFreeze gets there).
struct ElasticPlanStep {
  int64_t frozen_blocks = 0;
  int64_t at_step = -1;
  ElasticLayout layout;
};

// The step predicted before the run (--predict; docs/predict.md).
struct PredictionPlan {
  predict::StepPrediction step;
  int64_t samples_per_step = 0;  // the job's: batch x replicas
  double samples_per_s = 0;
  int64_t micro_batch = 0;  // the blocks were timed on this many samples
  struct Stage {
    double forward_ms = 0, backward_ms = 0;     // per micro-batch (DDP: the batch)
    double optimizer_ms = 0, allreduce_ms = 0;  // per step
    // Its rank at its fullest (memory_prediction.h), and what a step and the
    // evaluation add to the loaded process for it.
    int64_t peak_memory_bytes = 0, training_memory_bytes = 0, evaluation_memory_bytes = 0;
  };
  std::vector<Stage> stages;
  // Memory: what the run will report as its largest rank's peak, from what
  // this process held once it had loaded the data and the model (a rank's
  // start) plus each stage's training; "resident" on the CPU (the kernel's
  // high-water mark, as ranks report it), "cuda_allocator" on a GPU.
  struct Memory {
    int64_t peak_bytes = 0;
    int64_t loaded_bytes = 0, loaded_peak_bytes = 0;
    int64_t runtime_bytes = 0;  // resident besides tensors while training (CPU)
    std::string measured_as;
  } memory;
  std::vector<double> boundary_ms;  // per crossing: link + codec
  double codec_ms = 0;              // one encode + decode of a boundary's micro-batch
  std::string links;                // what the link model came from; "" none
  // The most ranks that share one machine's CPU cores (1: none share), and
  // how much slower each computes then than alone, as measured here.
  int64_t ranks_sharing_cores = 1;
  double core_sharing_slowdown = 1;
  // Where the block and optimizer times came from: "measured" now,
  // "profile" (this machine's, measured at block_costs_measured_ms) or
  // "node_profile" (measured on block_costs_node by `flotilla nodes profile`).
  std::string block_costs = "measured";
  int64_t block_costs_measured_ms = 0;
  std::string block_costs_node;
  std::string profile_file;        // "" when no profile is kept
  std::vector<std::string> notes;  // what the prediction leaves out here
  double took_ms = 0;
};

struct RunPlan {
  std::string name, model, dataset, strategy, schedule, device;
  std::vector<int64_t> input_shape;  // per sample
  int64_t vocab = 0;                 // above 0: inputs are token ids
  int64_t classes = 0;
  std::vector<BlockPlan> blocks;
  int64_t parameters = 0, trainable = 0;
  RunLayout layout;
  int64_t batch_size = 0;  // per replica
  int64_t chunks = 1;
  std::vector<int64_t> micro_batch_sizes;
  int64_t frozen_blocks = 0;  // at the first step
  std::vector<int64_t> balance;
  std::string balance_source;    // "given", "measured", "estimated", or "whole model"
  std::vector<double> block_ms;  // the costs a measured or estimated balance was cut by
  double measure_ms = 0;         // how long measuring (or estimating) took
  std::string codec;             // the codec's description; "none"
  // elastic.pipe: the layouts AutoPipe + AutoDP go through, by the costs in
  // `elastic_costs` ("measured": forward and backward timed; "estimated":
  // forward timed, backward taken as twice it).
  std::vector<ElasticPlanStep> elastic;
  std::string elastic_costs;
  std::vector<StagePlan> stages;
  std::vector<RankPlacement> ranks;
  std::vector<BoundaryPlan> boundaries;
  std::optional<PredictionPlan> prediction;
  double elapsed_ms = 0;  // computing this plan, in this process
};

// Throws as plan_json does.
RunPlan make_run_plan(const ExperimentConfig& config, const PlanOptions& options);

}  // namespace flotilla
