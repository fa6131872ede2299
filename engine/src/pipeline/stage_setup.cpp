#include "pipeline/stage_setup.h"

#include <algorithm>

#include "pipeline/partition.h"

namespace flotilla {
namespace {
torch::nn::AnyModule& block(torch::nn::Sequential model, int64_t index) {
  return *(model->begin() + index);
}

// Rank 0's `shared` on every rank, back on the CPU: the engine's own
// bookkeeping, not training traffic. Gloo broadcasts CPU tensors, NCCL
// device ones (the model's device).
torch::Tensor from_rank_zero(const torch::Tensor& shared, torch::nn::Sequential& model,
                             Communicator& comm) {
  auto device = model->parameters().empty() ? torch::Device(torch::kCPU)
                                            : model->parameters().front().device();
  std::vector<torch::Tensor> message{shared.to(device)};
  Communicator::Uncounted bookkeeping(comm);
  comm.broadcast(message, 0);
  return message[0].cpu();
}
}  // namespace

torch::Tensor measuring_example(const torch::Tensor& samples, const ExperimentConfig& config) {
  const int64_t micro = std::max<int64_t>(1, config.batch_size / config.chunks);
  return samples.slice(0, 0, std::min(micro, samples.size(0)));
}

torch::Tensor shape_example(const torch::Tensor& samples) {
  return samples.slice(0, 0, 1);
}

std::vector<BlockCost> measure_block_costs(torch::nn::Sequential& model,
                                           const torch::Tensor& example) {
  constexpr int kRepeats = 3;
  const bool was_training = model->is_training();
  model->eval();
  const auto since = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  std::vector<std::vector<double>> forward(model->size()), full(model->size());
  for (int r = 0; r < kRepeats; ++r) {
    auto x = example;
    for (size_t b = 0; b < model->size(); ++b) {
      auto input = x.is_floating_point() ? x.detach().requires_grad_(true) : x;
      const auto start = std::chrono::steady_clock::now();
      auto y = block(model, b).forward(input);
      if (y.is_cuda()) torch::cuda::synchronize();
      forward[b].push_back(since(start));
      y.sum().backward();
      if (y.is_cuda()) torch::cuda::synchronize();
      full[b].push_back(since(start));
      x = y.detach();
    }
  }
  for (auto& p : model->parameters()) p.mutable_grad().reset();
  if (was_training) model->train();
  const auto median = [](std::vector<double> s) {
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  };
  std::vector<BlockCost> costs;
  for (size_t b = 0; b < model->size(); ++b) costs.push_back({median(forward[b]), median(full[b])});
  return costs;
}

std::vector<double> measure_block_ms(torch::nn::Sequential& model, const torch::Tensor& example) {
  std::vector<double> ms;
  for (const auto& cost : measure_block_costs(model, example)) ms.push_back(cost.full_ms);
  return ms;
}

std::vector<BlockCost> shared_block_costs(torch::nn::Sequential& model,
                                          const torch::Tensor& example, Communicator& comm) {
  const auto blocks = static_cast<int64_t>(model->size());
  auto shared = torch::zeros({blocks, 2}, torch::kFloat64);
  if (comm.rank() == 0) {
    const auto costs = measure_block_costs(model, example);
    for (int64_t b = 0; b < blocks; ++b) {
      shared[b][0] = costs[size_t(b)].forward_ms;
      shared[b][1] = costs[size_t(b)].full_ms;
    }
  }
  const auto received = from_rank_zero(shared, model, comm);
  std::vector<BlockCost> costs;
  for (int64_t b = 0; b < blocks; ++b)
    costs.push_back({received[b][0].item<double>(), received[b][1].item<double>()});
  return costs;
}

std::vector<int64_t> measured_balance(torch::nn::Sequential& model, const torch::Tensor& example,
                                      int64_t stages, std::vector<double>* block_ms) {
  auto ms = measure_block_ms(model, example);
  auto balance = balance_by_cost(ms, stages);
  if (block_ms) *block_ms = std::move(ms);
  return balance;
}

std::vector<int64_t> resolve_balance(std::vector<int64_t> balance, int64_t stages,
                                     torch::nn::Sequential& model, const torch::Tensor& example,
                                     Communicator& comm) {
  if (!balance.empty()) return balance;
  auto shared = torch::zeros({stages}, torch::kInt64);
  if (comm.rank() == 0) {
    const auto cut = measured_balance(model, example, stages);
    for (int64_t s = 0; s < stages; ++s) shared[s] = cut[s];
  }
  const auto received = from_rank_zero(shared, model, comm);
  balance.assign(received.data_ptr<int64_t>(), received.data_ptr<int64_t>() + stages);
  return balance;
}

std::vector<std::vector<int64_t>> boundary_shapes(torch::nn::Sequential& model,
                                                  const torch::Tensor& example,
                                                  const std::vector<int64_t>& balance) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto offsets = stage_offsets(balance);
  std::vector<std::vector<int64_t>> shapes;
  auto x = example;
  for (size_t stage = 0; stage + 1 < balance.size(); ++stage) {
    for (int64_t b = offsets[stage]; b < offsets[stage + 1]; ++b) x = block(model, b).forward(x);
    shapes.emplace_back(x.sizes().begin() + 1, x.sizes().end());
  }
  if (was_training) model->train();
  return shapes;
}

torch::nn::Sequential stage_blocks(const torch::nn::Sequential& model,
                                   const std::vector<int64_t>& balance, int64_t stage) {
  const auto offsets = stage_offsets(balance);
  torch::nn::Sequential blocks;
  for (int64_t b = offsets[stage]; b < offsets[stage + 1]; ++b) blocks->push_back(block(model, b));
  return blocks;
}

}  // namespace flotilla
