#include "comm/gradient_buckets.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/utils/tensor_flatten.h>

namespace flotilla {

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> parameters, Communicator& comm,
                                 int64_t bucket_bytes, torch::ScalarType wire_dtype)
    : parameters_(std::move(parameters)),
      comm_(comm),
      wire_dtype_(wire_dtype),
      ranks_(torch::scalar_tensor(static_cast<double>(comm.size()))),
      bucket_of_(parameters_.size()),
      ready_(parameters_.size(), 0),
      self_(std::make_shared<std::atomic<GradientBuckets*>>(this)) {
  std::vector<int64_t> bytes;
  for (const auto& p : parameters_) bytes.push_back(p.numel() * p.element_size());
  for (auto& members : assign(bytes, bucket_bytes)) {
    buckets_.emplace_back();
    for (size_t i : members) bucket_of_[i] = buckets_.size() - 1;
    buckets_.back().parameters = std::move(members);
  }
  for (auto& bucket : buckets_) bucket.waiting = bucket.parameters.size();
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters_[i]);
    TORCH_CHECK(accumulator, "parameter ", i, " has no gradient accumulator: is it trainable?");
    auto self = self_;
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [self, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              if (auto* buckets = self->load()) buckets->gradient_ready(i);
              return outputs;
            }));
    hooks_.push_back({std::move(accumulator), key});
  }
}

std::vector<std::vector<size_t>> GradientBuckets::assign(
    const std::vector<int64_t>& parameter_bytes, int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t i = parameter_bytes.size(); i-- > 0;) {
    const int64_t bytes = parameter_bytes[i];
    // As PyTorch's DDP: the first bucket (the last layers, ready first) is
    // small, so that communication starts early in backward.
    const int64_t cap =
        buckets.size() == 1 ? std::min(bucket_bytes, kFirstBucketBytes) : bucket_bytes;
    if (buckets.empty() || (filled > 0 && filled + bytes > cap)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += bytes;
  }
  return buckets;
}

GradientBuckets::~GradientBuckets() {
  self_->store(nullptr);
  for (auto& hook : hooks_) hook.accumulator->del_post_hook(hook.key);
}

std::vector<std::vector<size_t>> GradientBuckets::bucket_layout() const {
  std::vector<std::vector<size_t>> layout;
  for (const auto& bucket : buckets_) layout.push_back(bucket.parameters);
  return layout;
}

void GradientBuckets::gradient_ready(size_t parameter) {
  if (!armed_.load()) return;
  std::lock_guard lock(mutex_);
  if (ready_[parameter]) return;  // a parameter used twice in one graph
  ready_[parameter] = 1;
  auto& bucket = buckets_[bucket_of_[parameter]];
  if (--bucket.waiting == 0) {
    start(bucket);
    if (!finishing_) ++started_during_backward_;
  }
}

void GradientBuckets::start(Bucket& bucket) {
  std::vector<torch::Tensor> grads;
  grads.reserve(bucket.parameters.size());
  for (size_t i : bucket.parameters) {
    const auto& grad = parameters_[i].grad();
    grads.push_back(grad.defined() ? grad : torch::zeros_like(parameters_[i]));
  }
  auto flat = torch::utils::flatten_dense_tensors(grads);
  if (flat.scalar_type() != wire_dtype_) {
    // Divided in float32 and written straight into the 2-byte buffer: on CUDA
    // one kernel, where div() then to() made and read a float32 copy more.
    auto wire = torch::empty(flat.sizes(), flat.options().dtype(wire_dtype_));
    torch::div_out(wire, flat, ranks_);
    flat = std::move(wire);
  }
  bucket.operation = comm_.start_allreduce_sum(std::move(flat));
}

void GradientBuckets::finish() {
  std::lock_guard lock(mutex_);
  finishing_ = true;
  for (auto& bucket : buckets_)
    if (!bucket.operation) start(bucket);
  const double ranks = static_cast<double>(comm_.size());
  for (auto& bucket : buckets_) {
    comm_.finish(*bucket.operation);
    auto sum = bucket.operation->tensor;
    // A reduced-precision bucket was averaged before it was sent.
    if (sum.scalar_type() != parameters_[bucket.parameters.front()].scalar_type())
      sum = sum.to(parameters_[bucket.parameters.front()].scalar_type());
    else
      sum.div_(ranks);
    std::vector<torch::Tensor> like;
    for (size_t i : bucket.parameters) like.push_back(parameters_[i]);
    const auto averaged = torch::utils::unflatten_dense_tensors(sum, like);
    // The averaged gradients stay views of the bucket: no copy back. The
    // trainer drops gradients after each step, so the next backward writes
    // fresh ones rather than adding into these.
    for (size_t k = 0; k < bucket.parameters.size(); ++k)
      parameters_[bucket.parameters[k]].mutable_grad() = averaged[k];
    bucket.operation.reset();
    bucket.waiting = bucket.parameters.size();
  }
  std::fill(ready_.begin(), ready_.end(), 0);
  last_started_during_backward_ = std::exchange(started_during_backward_, 0);
  finishing_ = false;
}

}  // namespace flotilla
