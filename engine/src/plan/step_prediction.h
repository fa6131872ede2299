#pragma once
// A step's time predicted before the run (issue 27): the engine's own
// schedules replayed on per-stage compute times and a link model, as dPRO
// replays traces and Paleo composes layer costs. Pure arithmetic on what the
// plan knows (block times from --measure or the estimate, bytes per boundary
// and per bucket) and what `flotilla nodes bench` measured of the links;
// docs/predict.md says what it assumes.

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla::predict {

// A point-to-point transfer: a fixed latency, then bytes at a bandwidth.
struct LinkModel {
  double latency_ms = 0;
  double bytes_per_ms = std::numeric_limits<double>::infinity();
  double time_ms(double bytes) const;
};

// A ring all-reduce over P ranks, from the bus bandwidth measured at message
// sizes (nccl-tests' busbw: time = 2 (P-1)/P x bytes / busbw), interpolated
// in log size between measured points and held at the ends. Without points
// (one rank, or nothing measured) an all-reduce costs nothing.
struct AllReduceModel {
  std::vector<std::pair<double, double>> busbw_gbps_at_bytes;  // (bytes, GB/s), any order
  double time_ms(double bytes, int64_t ranks) const;
};

// One pipeline stage's compute for one micro-batch, and its step's tail.
struct StageCost {
  double forward_ms = 0;
  double backward_ms = 0;      // 0 where every block of the stage is frozen
  double optimizer_ms = 0;     // once a step, after the last backward
  double allreduce_bytes = 0;  // its gradients among the replicas (Pipe+DDP); 0: none
};

struct PipelineInputs {
  Schedule schedule = Schedule::gpipe;
  std::vector<StageCost> stages;
  int64_t micro_batches = 1;
  // Per boundary (stages - 1 of them), per micro-batch: bytes each way on
  // the wire (the codec's payload with one), and the codec's encode + decode.
  std::vector<double> boundary_bytes;
  std::vector<double> boundary_codec_ms;
  LinkModel link;
  std::vector<LinkModel> boundary_links;  // per boundary, when they differ; empty: `link`
  AllReduceModel allreduce;               // among replicas of a stage
  int64_t replicas = 1;
  // Ranks sharing one machine's CPU cores: stage s's ranks run on machine
  // stage_machine[s], stage_ranks[s] of them, and while n ranks of a machine
  // compute at once each of their operations takes core_sharing[n - 1]
  // times as long (core_sharing.h; beyond the measured n, in proportion).
  // Empty: every stage has cores of its own.
  std::vector<int64_t> stage_machine, stage_ranks;
  std::vector<double> core_sharing;
};

// The slowdown of n ranks computing at once on one machine, from the
// measured slowdowns of 1, 2, ... (core_sharing.h): 1 for n <= 1, beyond the
// measured ones the last grown in proportion (time-slicing).
double sharing_slowdown(const std::vector<double>& measured, int64_t at_once);

struct StepPrediction {
  double step_ms = 0;
  double compute_ms = 0;       // the busiest rank's forward + backward + optimizer
  double exposed_comm_ms = 0;  // step_ms - compute_ms: waits for other stages and links
  double bubble_fraction = 0;  // 1 - Σ stage compute / (stages x step_ms)
};

// Every stage runs its schedule's operations in order (stage_schedule: the
// engine's GPipe and 1F1B), each as soon as its input has arrived: a
// forward after the stage before finished it and the activations crossed
// the link, a backward after the stage after finished it and the gradients
// crossed back. A transfer starts once its receiver is free to post the
// receive (Gloo's sends wait for it) and overlaps the sender's compute;
// concurrent transfers do not slow each other. Stages on one machine's cores progress at the rate
// its core_sharing gives for the ranks computing there at that moment (processor sharing, replayed
// event by event). Then each stage all-reduces its gradients (Pipe+DDP) and steps its optimizer;
// the step ends when the last stage has.
StepPrediction predict_pipeline(const PipelineInputs& inputs);

// Data parallelism (DDP): the forward, then the backward block by block in
// reverse, each bucket's all-reduce launched once its last gradient is ready
// and run one after the other as the engine's comm stream does; the
// optimizer after the last bucket.
struct DdpInputs {
  std::vector<double> block_forward_ms, block_backward_ms;  // in model order
  // Buckets in launch order, each the blocks it closes with (the last block
  // of the bucket in backward order, i.e. its lowest index) and its bytes.
  std::vector<std::pair<int64_t, double>> buckets;
  double optimizer_ms = 0;
  AllReduceModel allreduce;
  int64_t ranks = 1;
  // Ranks sharing one machine's CPU cores: each compute takes `slowdown`
  // times as long, and where they fill its cores the all-reduces (Gloo's
  // threads need those cores too) run after the backward, not beside it.
  double slowdown = 1;
  bool comm_beside_backward = true;
};
StepPrediction predict_ddp(const DdpInputs& inputs);

}  // namespace flotilla::predict
