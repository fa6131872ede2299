#include "strategy/data_parallel.h"

namespace flotilla {

DataParallel::DataParallel(const std::function<torch::nn::Sequential()>& build,
                           std::vector<torch::Device> devices)
    : devices_(std::move(devices)) {
  TORCH_CHECK(!devices_.empty(), "DataParallel needs at least one device");
  for (const auto& device : devices_) {
    auto replica = build();
    replica->to(device);
    replicas_.push_back(replica);
  }
  broadcast_primary();
}

DataParallel::Output DataParallel::forward(const torch::Tensor& inputs,
                                           const torch::Tensor& targets) {
  const auto count = static_cast<int64_t>(replicas_.size());
  const int64_t batch = inputs.size(0);
  const auto input_parts = inputs.tensor_split(count);
  const auto target_parts = targets.tensor_split(count);
  const auto primary = devices_.front();
  Output out{torch::zeros({}, torch::TensorOptions().device(primary)),
             torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(primary))};
  losses_.clear();
  // Kernels are queued on each device in turn; the devices run them concurrently.
  for (int64_t k = 0; k < count; ++k) {
    const int64_t n = input_parts[k].size(0);
    if (n == 0) continue;
    const auto& device = devices_[k];
    auto logits = replicas_[k]->forward(input_parts[k].to(device, /*non_blocking=*/true));
    const auto part_targets = target_parts[k].to(device, /*non_blocking=*/true);
    // Each part's mean weighted by its share: the sum is the batch's mean.
    // The loss in float32 whatever the forward's autocast dtype.
    losses_.push_back(
        torch::nn::functional::cross_entropy(logits.to(torch::kFloat32), part_targets) *
        (static_cast<double>(n) / static_cast<double>(batch)));
    torch::NoGradGuard no_grad;
    out.loss += losses_.back().detach().to(primary);
    out.correct += logits.argmax(1).eq(part_targets).sum().to(primary);
  }
  return out;
}

void DataParallel::backward(double loss_scale) {
  for (auto& loss : losses_) (loss_scale == 1.0 ? loss : loss * loss_scale).backward();
  losses_.clear();
}

void DataParallel::reduce_gradients() {
  torch::NoGradGuard no_grad;
  const auto primary = devices_.front();
  auto primary_params = replicas_.front()->parameters();
  for (size_t k = 1; k < replicas_.size(); ++k) {
    auto params = replicas_[k]->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& grad = params[i].grad();
      if (!grad.defined()) continue;
      auto& sum = primary_params[i].mutable_grad();
      if (sum.defined())
        sum.add_(grad.to(primary));
      else
        sum = grad.to(primary);
      params[i].mutable_grad().reset();
    }
  }
}

void DataParallel::broadcast_primary() {
  torch::NoGradGuard no_grad;
  auto from = replicas_.front()->parameters();
  auto from_buffers = replicas_.front()->buffers();
  for (size_t k = 1; k < replicas_.size(); ++k) {
    auto to = replicas_[k]->parameters();
    for (size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i], /*non_blocking=*/true);
    auto to_buffers = replicas_[k]->buffers();
    for (size_t i = 0; i < to_buffers.size(); ++i)
      to_buffers[i].copy_(from_buffers[i], /*non_blocking=*/true);
  }
}

}  // namespace flotilla
