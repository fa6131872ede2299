#include "comm/communicator.h"

#include "torch_adapter.h"

namespace flotilla {
namespace {

int64_t payload_bytes(const std::vector<torch::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const auto& t : tensors) bytes += t.numel() * t.element_size();
  return bytes;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

std::unique_ptr<Communicator> Communicator::connect(const DistributedEnv& env, bool cuda,
                                                    std::chrono::milliseconds timeout) {
  return std::unique_ptr<Communicator>(
      new Communicator(ProcessGroupAdapter::connect(env, cuda, timeout), env.rank, env.world_size));
}

Communicator::Communicator(std::unique_ptr<ProcessGroupAdapter> group, int64_t rank, int64_t size)
    : group_(std::move(group)), rank_(rank), size_(size) {}

Communicator::~Communicator() = default;

void Communicator::allreduce_sum(std::vector<torch::Tensor>& tensors) {
  const auto start = std::chrono::steady_clock::now();
  // c10d reads a list as one tensor per device; several tensors are several operations.
  for (auto& t : tensors) {
    std::vector<torch::Tensor> one{t};
    group_->allreduce_sum(one);
  }
  const double ms = ms_since(start);
  const int64_t bytes = payload_bytes(tensors);
  // nccl-tests count an all-reduce's payload once each way for a rank.
  stats_.bytes_sent += bytes;
  stats_.bytes_recv += bytes;
  stats_.operations += static_cast<int64_t>(tensors.size());
  stats_.busy_ms += ms;
  stats_.allreduce_bytes += static_cast<double>(bytes);
  stats_.allreduce_ms += ms;
}

AsyncAllreduce Communicator::start_allreduce_sum(torch::Tensor tensor) {
  AsyncAllreduce operation;
  operation.started = std::chrono::steady_clock::now();
  operation.pending = group_->allreduce_sum_async(tensor);
  operation.tensor = std::move(tensor);
  return operation;
}

void Communicator::finish(AsyncAllreduce& operation) {
  operation.pending->wait();
  const double ms = std::chrono::duration<double, std::milli>(operation.pending->completed_at() -
                                                              operation.started)
                        .count();
  const int64_t bytes = operation.tensor.numel() * operation.tensor.element_size();
  std::lock_guard lock(stats_mutex_);
  stats_.bytes_sent += bytes;
  stats_.bytes_recv += bytes;
  stats_.operations += 1;
  stats_.busy_ms += ms;
  stats_.allreduce_bytes += static_cast<double>(bytes);
  stats_.allreduce_ms += ms;
}

void Communicator::allreduce_mean(std::vector<torch::Tensor>& tensors) {
  allreduce_sum(tensors);
  for (auto& t : tensors) t.div_(static_cast<double>(size_));
}

void Communicator::broadcast(std::vector<torch::Tensor>& tensors, int64_t root) {
  const auto start = std::chrono::steady_clock::now();
  for (auto& t : tensors) {
    std::vector<torch::Tensor> one{t};
    group_->broadcast(one, static_cast<int>(root));
  }
  const int64_t bytes = payload_bytes(tensors);
  (rank_ == root ? stats_.bytes_sent : stats_.bytes_recv) += bytes;
  stats_.operations += static_cast<int64_t>(tensors.size());
  stats_.busy_ms += ms_since(start);
}

void Communicator::barrier() {
  group_->barrier();
}

CommStats Communicator::take_stats() {
  std::lock_guard lock(stats_mutex_);
  return std::exchange(stats_, CommStats{});
}

}  // namespace flotilla
