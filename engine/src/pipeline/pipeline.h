#pragma once
// One rank's stage of a pipeline: its blocks, the schedule of its micro-batches'
// forward and backward passes, and the point-to-point links that carry
// activations to the next stage and gradients back to the previous one, each
// optionally through an activation codec.

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "codec/activation_codec.h"
#include "comm/communicator.h"
#include "comm/gradient_buckets.h"
#include "metrics/phase_timer.h"
#include "pipeline/schedule.h"

namespace flotilla {

struct PipelinePlan {
  int64_t stages = 2;
  int64_t stage = 0;
  int64_t replica = 0;           // pipeline_ddp: which pipeline; rank = replica * stages + stage
  std::vector<int64_t> balance;  // blocks per stage
  // Per-sample shape of the tensor each stage but the last hands on.
  std::vector<std::vector<int64_t>> boundary_shapes;
  Schedule schedule = Schedule::gpipe;
  int64_t chunks = 1;
  bool checkpoint = false;
  // The forward's autocast dtype (float32: none), which activations and
  // their gradients also cross each boundary in (a codec encodes them from
  // float32 as ever).
  torch::ScalarType compute_dtype = torch::kFloat32;

  int64_t rank_of(int64_t stage_index) const { return replica * stages + stage_index; }
  int64_t first_block() const;  // of this stage, in the whole model
  int64_t end_block() const;
  bool is_first() const { return stage == 0; }
  bool is_last() const { return stage == stages - 1; }
  // With the whole model's first `frozen` blocks frozen: whether this stage's
  // input needs a gradient (some block before it still trains), which is then
  // sent back across the boundary before it.
  bool input_needs_grad(int64_t frozen) const { return !is_first() && frozen < first_block(); }
};

// What passed through this stage's codec since the last take.
struct LinkStats {
  int64_t raw_bytes = 0;   // bytes of the tensors sent, in the compute dtype
  int64_t wire_bytes = 0;  // bytes they took on the wire
  double encode_ms = 0;
  double decode_ms = 0;
  // Receives, by what they carry: activations from the stage before,
  // gradients from the stage after. Bytes as they came off the wire, and the
  // time from posting the receive to holding them, any wait for the sender
  // included (so bytes / time is a lower bound on the link's bandwidth).
  int64_t activation_recv_bytes = 0, gradient_recv_bytes = 0;
  double activation_recv_ms = 0, gradient_recv_ms = 0;
};

class Pipeline {
 public:
  // `blocks`: this stage's blocks, on `device`. `codec`: nullptr sends fp32.
  Pipeline(PipelinePlan plan, torch::nn::Sequential blocks, torch::Device device,
           Communicator& comm, std::unique_ptr<ActivationCodec> codec);
  ~Pipeline();

  struct StepOutput {
    torch::Tensor loss;     // the batch's mean loss, last stage only
    torch::Tensor correct;  // int64 hits, last stage only
  };
  // One step over a batch of `batch_size` samples: `inputs` are used on the
  // first stage, `targets` on the last (others may pass undefined tensors).
  // Leaves this stage's gradients, summed over micro-batches, in its
  // parameters; with `buckets` (pipeline_ddp) their all-reduce starts during
  // the last micro-batch's backward, and the caller finishes it. The last
  // stage differentiates its loss times `loss_scale` (fp16's dynamic scale),
  // so every stage's gradients are scaled alike.
  StepOutput train_step(const torch::Tensor& inputs, const torch::Tensor& targets,
                        int64_t batch_size, GradientBuckets* buckets, PhaseTimer* timer,
                        double loss_scale = 1.0);
  // Forward only, as one micro-batch; the hits on the last stage, undefined elsewhere.
  torch::Tensor evaluate(const torch::Tensor& inputs, const torch::Tensor& targets,
                         int64_t batch_size);

  // Leading blocks of the whole model that are frozen: they run no backward,
  // and no gradient crosses a boundary with only frozen blocks before it.
  void set_frozen_blocks(int64_t frozen) { frozen_ = frozen; }
  // elastic.cache on the first stage: the inputs it is given are the output
  // of its first `blocks` blocks (read from the cache), which it then skips.
  void set_leading_blocks_done(int64_t blocks) { leading_done_ = blocks; }

  const PipelinePlan& plan() const { return plan_; }
  LinkStats take_link_stats() { return std::exchange(link_stats_, LinkStats{}); }

 private:
  struct MicroBatch {
    torch::Tensor input, output, targets;  // output: the loss on the last stage
    double weight = 0;                     // its share of the batch
  };
  void forward(MicroBatch& micro, int64_t size, PhaseTimer* timer, torch::Tensor& correct);
  void backward(MicroBatch& micro, int64_t size, PhaseTimer* timer, double loss_scale);
  torch::Tensor run_blocks(const torch::Tensor& input, const MicroBatch& micro,
                           torch::Tensor* correct);
  // This stage's input needs a gradient: some block before it still trains.
  bool input_needs_grad() const { return plan_.input_needs_grad(frozen_); }
  bool trains() const { return frozen_ < plan_.end_block(); }

  void send(torch::Tensor tensor, int64_t to, int tag);
  torch::Tensor receive(std::vector<int64_t> shape, int64_t from, int tag);
  void finish_sends();
  std::vector<int64_t> shape_at(int64_t boundary, int64_t batch) const;

  PipelinePlan plan_;
  torch::nn::Sequential blocks_;
  torch::Device device_;
  Communicator& comm_;
  std::unique_ptr<ActivationCodec> codec_;
  int64_t frozen_ = 0;
  int64_t leading_done_ = 0;
  std::vector<AsyncOperation> sends_;
  LinkStats link_stats_;
};

}  // namespace flotilla
