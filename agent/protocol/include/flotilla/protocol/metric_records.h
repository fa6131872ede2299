#pragma once
// The records a training rank emits, one JSON object per line. Field names are
// those of DESIGN.md's metric table; record_fields.h lists each record's
// fields once for the writer, the reader and docs/records.md. The agent adds
// `time` and numbers each line on the way.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::records {

enum class Outcome { finished, failed, oom, killed };
std::string_view name_of(Outcome outcome);
std::optional<Outcome> outcome_from_name(std::string_view name);

struct Start {
  int64_t rank = 0;
  int64_t world_size = 1;
  std::string model;
  std::string dataset;
  std::string device;
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;
  int64_t blocks = 0;
  std::vector<int64_t> block_parameters;  // parameters of each block, in order
  // Pipelines: blocks per stage, as given or as measured, and this rank's stage.
  std::vector<int64_t> balance;
  int64_t steps_per_epoch = 0;
  int64_t threads = 0;       // LibTorch's intra-op pool
  std::string blas;          // the BLAS library behind libblas.so.3, as found at run time
  int64_t blas_threads = 0;  // its pool (1: single-threaded)
  std::string torch_version;
  // The flotilla-train that ran the rank, its path on the node: the bundle's
  // or the one the node built for itself (docs/nodes.md).
  std::string engine;
  // The machine the rank ran on: its kernel's boot id, shared by every
  // container or namespace of one machine and by no two machines, and the
  // cores this rank could run on. Ranks of one machine share its cores
  // (docs/predict.md).
  std::string machine;
  int64_t cores = 0;
  std::string precision = "fp32";  // the config's: fp32, bf16 or fp16
  // The dtypes the step records' bytes were counted in ("float32",
  // "bfloat16", "float16"): what gradient buckets are all-reduced in (empty
  // where this rank all-reduces none) and what crosses a pipeline boundary
  // before any codec (empty without a pipeline).
  std::string gradient_dtype;
  std::string boundary_dtype;
  // The checkpoint's step a resumed rank went on from (its step records go on
  // from the next); 0: a run from its start.
  int64_t resumed_from_step = 0;
};

struct Step {
  int64_t rank = 0;
  int64_t epoch = 0;
  int64_t step = 0;     // 1-based, counted over the whole run
  int64_t samples = 0;  // global samples in this step
  // Only ranks that compute the loss have it: in a pipeline, the last stage.
  std::optional<double> loss = 0.0;
  double lr = 0;
  double data_ms = 0;
  double forward_ms = 0;
  double backward_ms = 0;
  double comm_ms = 0;
  double comm_busy_ms = 0;
  double optimizer_ms = 0;
  double step_ms = 0;
  double samples_per_s = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_recv = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  double comm_per_s = 0;
  int64_t mem_alloc = 0;
  int64_t mem_reserved = 0;
  int64_t mem_peak = 0;
  int64_t frozen_blocks = 0;  // leading blocks frozen during this step
  // elastic.cache: samples of this rank's batch whose frozen blocks' output
  // was read from the cache instead of computed (written only when above 0).
  int64_t cached_samples = 0;
  // Pipelines only (stage < 0 elsewhere): this rank's place, its compute time
  // (busy) and the rest of the step outside data loading and the optimizer
  // (idle: the bubble plus exposed communication).
  int64_t stage = -1;
  int64_t replica = 0;
  double busy_ms = 0;
  double idle_ms = 0;
  // Compressed links only (ratio 0 elsewhere): fp32 bytes over bytes on the
  // wire for the activations and gradients this rank sent, and codec time.
  double compression_ratio = 0;
  double encode_ms = 0;
  double decode_ms = 0;
  // Pipeline ranks that receive (written when above 0): bytes received from
  // the stage before (activations) and after (gradients), and the time from
  // posting each receive to holding its bytes, waiting for the sender included.
  int64_t recv_act_bytes = 0, recv_grad_bytes = 0;
  double recv_act_ms = 0, recv_grad_ms = 0;
  // precision fp16 only (0 elsewhere): the loss scale this step used, and
  // whether its optimizer step was skipped for a non-finite gradient.
  double loss_scale = 0;
  bool skipped = false;
};

struct Epoch {
  int64_t rank = 0;
  int64_t epoch = 0;
  int64_t steps = 0;
  double loss = 0;       // mean training loss over the epoch
  double acc_train = 0;  // fractions in 0..1
  double acc_test = 0;
  double epoch_s = 0;
  double samples_per_s = 0;
  // The node's traffic over the epoch's training (every interface but the
  // loopback, as /proc/net/dev counts it); -1 where not read.
  int64_t nic_rx_bytes = -1;
  int64_t nic_tx_bytes = -1;
};

struct End {
  int64_t rank = 0;
  Outcome outcome = Outcome::finished;
  std::string message;
  int64_t batch_size = 0;
  int64_t steps = 0;
  int64_t epochs = 0;
  double elapsed_s = 0;
  double wall_time = 0;  // seconds since the Unix epoch when the outcome was decided
};

// One message size of an all-reduce sweep (flotilla-train --allreduce-bench),
// as nccl-tests defines its columns.
struct Bench {
  int64_t rank = 0;
  std::string op = "allreduce";
  int64_t bytes = 0;     // payload of one operation
  int64_t elements = 0;  // float32 values: bytes / 4
  int64_t iterations = 0;
  double time_us = 0;     // mean per operation, averaged over the ranks
  double algbw_gbps = 0;  // bytes / time, GB/s (1e9 bytes)
  double busbw_gbps = 0;  // algbw x 2(P-1)/P
  int64_t ranks = 1;      // P
};

// An elastic pipeline changed its layout (elastic.pipe, PipeTransformer's
// AutoPipe + AutoDP) before step `step`: every rank writes one.
struct Transition {
  int64_t rank = 0;
  int64_t epoch = 0;
  int64_t step = 0;           // the first step trained in the new layout
  int64_t frozen_blocks = 0;  // the frozen prefix that made it
  int64_t from_stages = 1, from_replicas = 1;
  int64_t to_stages = 1, to_replicas = 1;
  std::vector<int64_t> from_balance, balance;  // blocks per stage, before and after
  int64_t stage = 0;                           // this rank's place from now on
  int64_t replica = 0;
  int64_t batch_per_replica = 0;  // the global batch, re-split
  int64_t chunks = 1;
  int64_t bytes_moved = 0;  // parameters, buffers and optimizer state this rank received
  double ms = 0;            // how long the transition took on this rank
};

std::string to_line(const Start& r);
std::string to_line(const Step& r);
std::string to_line(const Epoch& r);
std::string to_line(const End& r);
std::string to_line(const Bench& r);
std::string to_line(const Transition& r);

}  // namespace flotilla::records
