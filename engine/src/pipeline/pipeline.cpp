#include "pipeline/pipeline.h"

#include <optional>

#include "codec/activation_codec.h"
#include "metrics/phase_timer.h"
#include "models/layers.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

// Activations forward and gradients backward travel under their own tags, so
// that neither direction's messages can be taken for the other's.
constexpr int kActivationTag = 0;
constexpr int kGradientTag = 1;

void end_phase(PhaseTimer* timer, Phase phase) {
  if (timer) timer->end_phase(phase);
}

}  // namespace

int64_t PipelinePlan::first_block() const {
  int64_t first = 0;
  for (int64_t s = 0; s < stage; ++s) first += balance.at(s);
  return first;
}

int64_t PipelinePlan::end_block() const {
  return first_block() + balance.at(stage);
}

Pipeline::Pipeline(PipelinePlan plan, torch::nn::Sequential blocks, torch::Device device,
                   Communicator& comm, std::unique_ptr<ActivationCodec> codec)
    : plan_(std::move(plan)),
      blocks_(std::move(blocks)),
      device_(device),
      comm_(comm),
      codec_(std::move(codec)) {}

Pipeline::~Pipeline() {
  // A send still in flight holds its tensor; let it end before the memory goes.
  try {
    finish_sends();
  } catch (...) {
  }
}

std::vector<int64_t> Pipeline::shape_at(int64_t boundary, int64_t batch) const {
  std::vector<int64_t> shape{batch};
  const auto& sample = plan_.boundary_shapes.at(boundary);
  shape.insert(shape.end(), sample.begin(), sample.end());
  return shape;
}

Pipeline::StepOutput Pipeline::train_step(const torch::Tensor& inputs, const torch::Tensor& targets,
                                          int64_t batch_size, GradientBuckets* buckets,
                                          PhaseTimer* timer, double loss_scale) {
  // tensor_split's sizes: they differ by at most one, and every stage computes them alike.
  const auto sizes = micro_batch_sizes(batch_size, plan_.chunks);
  const auto count = static_cast<int64_t>(sizes.size());
  std::vector<MicroBatch> micro(count);
  for (int64_t i = 0; i < count; ++i)
    micro[i].weight = static_cast<double>(sizes[i]) / static_cast<double>(batch_size);
  if (plan_.is_first()) {
    auto parts = inputs.to(device_, /*non_blocking=*/true).tensor_split(count);
    for (int64_t i = 0; i < count; ++i) micro[i].input = parts[i];
  }
  if (plan_.is_last()) {
    auto parts = targets.to(device_, /*non_blocking=*/true).tensor_split(count);
    for (int64_t i = 0; i < count; ++i) micro[i].targets = parts[i];
  }
  end_phase(timer, Phase::data);

  StepOutput out;
  if (plan_.is_last()) {
    const auto options = torch::TensorOptions().device(device_);
    out.correct = torch::zeros({}, options.dtype(torch::kInt64));
    out.loss = torch::zeros({}, options.dtype(torch::kFloat32));
  }
  const auto ops = stage_schedule(plan_.schedule, plan_.stages, plan_.stage, count);
  size_t last_backward = 0;
  for (size_t k = 0; k < ops.size(); ++k)
    if (ops[k].kind == PipelineOp::Kind::backward) last_backward = k;
  if (buckets) buckets->set_armed(false);
  for (size_t k = 0; k < ops.size(); ++k) {
    auto& m = micro[ops[k].micro_batch];
    const int64_t size = sizes[ops[k].micro_batch];
    if (ops[k].kind == PipelineOp::Kind::forward) {
      forward(m, size, timer, out.correct);
      if (plan_.is_last()) out.loss += m.output.detach();
    } else {
      if (buckets && k == last_backward) buckets->set_armed(true);
      backward(m, size, timer, loss_scale);
    }
  }
  finish_sends();
  end_phase(timer, Phase::comm);
  return out;
}

torch::Tensor Pipeline::run_blocks(const torch::Tensor& input, const MicroBatch& micro,
                                   torch::Tensor* correct) {
  torch::Tensor output;
  {
    AutocastScope autocast(device_.is_cuda(), plan_.compute_dtype);
    output = leading_done_ == 0
                 ? blocks_->forward(input)
                 : models::forward_blocks(blocks_, leading_done_,
                                          static_cast<int64_t>(blocks_->size()), input);
  }
  if (!plan_.is_last()) return output;
  if (correct) {
    torch::NoGradGuard no_grad;
    *correct += output.argmax(1).eq(micro.targets).sum();
  }
  // Each micro-batch's mean loss weighted by its share: the sum over
  // micro-batches is the batch's mean loss, and so are the gradients.
  return torch::nn::functional::cross_entropy(output.to(torch::kFloat32), micro.targets) *
         micro.weight;
}

void Pipeline::forward(MicroBatch& micro, int64_t size, PhaseTimer* timer, torch::Tensor& correct) {
  if (!plan_.is_first()) {
    micro.input =
        receive(shape_at(plan_.stage - 1, size), plan_.rank_of(plan_.stage - 1), kActivationTag);
    end_phase(timer, Phase::comm);
    if (input_needs_grad()) micro.input.requires_grad_(true);
  }
  {
    // Checkpointing keeps only the input and recomputes the rest in backward;
    // a stage with only frozen blocks builds no graph at all.
    std::optional<torch::NoGradGuard> no_grad;
    if (plan_.checkpoint || !trains()) no_grad.emplace();
    micro.output = run_blocks(micro.input, micro, &correct);
  }
  end_phase(timer, Phase::forward);
  if (!plan_.is_last()) {
    send(micro.output.detach(), plan_.rank_of(plan_.stage + 1), kActivationTag);
    end_phase(timer, Phase::comm);
    if (plan_.checkpoint) micro.output = torch::Tensor();
  }
}

void Pipeline::backward(MicroBatch& micro, int64_t size, PhaseTimer* timer, double loss_scale) {
  if (!trains()) {
    micro = {};
    return;
  }
  torch::Tensor grad_output;
  if (!plan_.is_last()) {
    grad_output =
        receive(shape_at(plan_.stage, size), plan_.rank_of(plan_.stage + 1), kGradientTag);
    end_phase(timer, Phase::comm);
  }
  auto output = plan_.checkpoint ? run_blocks(micro.input, micro, nullptr) : micro.output;
  // A stage whose trainable blocks hold no parameters and whose input needs no
  // gradient has nothing to differentiate.
  if (output.requires_grad()) {
    if (plan_.is_last())
      (loss_scale == 1.0 ? output : output * loss_scale).backward();
    else
      output.backward(grad_output.to(output.scalar_type()));
  }
  end_phase(timer, Phase::backward);
  if (input_needs_grad()) {
    auto grad = micro.input.grad();
    send(grad.defined() ? grad : torch::zeros_like(micro.input), plan_.rank_of(plan_.stage - 1),
         kGradientTag);
    end_phase(timer, Phase::comm);
  }
  micro = {};
}

torch::Tensor Pipeline::evaluate(const torch::Tensor& inputs, const torch::Tensor& targets,
                                 int64_t batch_size) {
  torch::NoGradGuard no_grad;
  auto input = plan_.is_first() ? inputs.to(device_)
                                : receive(shape_at(plan_.stage - 1, batch_size),
                                          plan_.rank_of(plan_.stage - 1), kActivationTag);
  torch::Tensor output;
  {
    AutocastScope autocast(device_.is_cuda(), plan_.compute_dtype);
    output = blocks_->forward(input);
  }
  if (plan_.is_last()) return output.argmax(1).eq(targets.to(device_)).sum();
  send(output, plan_.rank_of(plan_.stage + 1), kActivationTag);
  finish_sends();
  return {};
}

void Pipeline::send(torch::Tensor tensor, int64_t to, int tag) {
  TORCH_CHECK(tensor.is_floating_point(), "pipeline stages exchange floating-point tensors, got ",
              tensor.scalar_type());
  // Under autocast a block may end in either dtype. Uncompressed, the
  // boundary carries the compute dtype; a codec encodes float32, taken from
  // the tensor as it is rather than rounded to the compute dtype and back.
  const int64_t raw = tensor.numel() * static_cast<int64_t>(c10::elementSize(plan_.compute_dtype));
  if (codec_) {
    const auto start = std::chrono::steady_clock::now();
    tensor = codec_->encode(tensor.to(torch::kFloat32));
    link_stats_.encode_ms += ms_since(start);
  } else {
    tensor = tensor.to(plan_.compute_dtype).contiguous();
  }
  link_stats_.raw_bytes += raw;
  link_stats_.wire_bytes += tensor.numel() * tensor.element_size();
  sends_.push_back(comm_.start_send(std::move(tensor), to, tag));
}

torch::Tensor Pipeline::receive(std::vector<int64_t> shape, int64_t from, int tag) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const auto options = torch::TensorOptions().device(device_);
  auto buffer = codec_ ? torch::empty({codec_->encoded_bytes(numel)}, options.dtype(torch::kUInt8))
                       : torch::empty(shape, options.dtype(plan_.compute_dtype));
  const auto posted = std::chrono::steady_clock::now();
  auto operation = comm_.start_recv(buffer, from, tag);
  comm_.finish(operation);
  const double waited = ms_since(posted);
  const int64_t bytes = buffer.numel() * buffer.element_size();
  if (tag == kActivationTag) {
    link_stats_.activation_recv_ms += waited;
    link_stats_.activation_recv_bytes += bytes;
  } else {
    link_stats_.gradient_recv_ms += waited;
    link_stats_.gradient_recv_bytes += bytes;
  }
  if (!codec_) return buffer;
  const auto start = std::chrono::steady_clock::now();
  auto values = codec_->decode(buffer, numel).view(shape);
  link_stats_.decode_ms += ms_since(start);
  return values;
}

void Pipeline::finish_sends() {
  for (auto& operation : sends_) comm_.finish(operation);
  sends_.clear();
}

}  // namespace flotilla
