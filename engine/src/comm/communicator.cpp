#include "comm/communicator.h"

#include "metrics/phase_timer.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

int64_t payload_bytes(const torch::Tensor& t) {
  return t.numel() * t.element_size();
}

}  // namespace

std::unique_ptr<Communicator> Communicator::connect(const DistributedEnv& env, bool cuda,
                                                    std::chrono::milliseconds timeout) {
  return std::unique_ptr<Communicator>(
      new Communicator(ProcessGroupAdapter::connect(env, cuda, timeout), env.rank, env.world_size,
                       std::make_shared<Shared>()));
}

Communicator::Communicator(std::unique_ptr<ProcessGroupAdapter> group, int64_t rank, int64_t size,
                           std::shared_ptr<Shared> shared)
    : group_(std::move(group)), rank_(rank), size_(size), shared_(std::move(shared)) {}

Communicator::~Communicator() = default;

std::unique_ptr<Communicator> Communicator::subgroup(const std::string& name,
                                                     const std::vector<int64_t>& members) {
  const auto me = std::find(members.begin(), members.end(), rank_);
  TORCH_CHECK(me != members.end(), "rank ", rank_, " is not a member of group ", name);
  const auto rank = static_cast<int64_t>(me - members.begin());
  const auto size = static_cast<int64_t>(members.size());
  return std::unique_ptr<Communicator>(new Communicator(
      group_->subgroup(name, static_cast<int>(rank), static_cast<int>(size)), rank, size, shared_));
}

void Communicator::count(AsyncOperation::Kind kind, int64_t bytes, double ms, int64_t operations) {
  std::lock_guard lock(shared_->mutex);
  if (shared_->uncounted > 0) return;
  auto& s = shared_->stats;
  switch (kind) {
    case AsyncOperation::Kind::allreduce:
      // nccl-tests count an all-reduce's payload once each way for a rank.
      s.bytes_sent += bytes;
      s.bytes_recv += bytes;
      s.allreduce_bytes += static_cast<double>(bytes);
      s.allreduce_ms += ms;
      s.allreduce_ranks = size_;
      break;
    case AsyncOperation::Kind::send:
      s.bytes_sent += bytes;
      break;
    case AsyncOperation::Kind::recv:
      s.bytes_recv += bytes;
      break;
  }
  s.operations += operations;
  s.busy_ms += ms;
}

void Communicator::allreduce_sum(std::vector<torch::Tensor>& tensors) {
  // c10d reads a list as one tensor per device; several tensors are several operations.
  for (auto& t : tensors) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<torch::Tensor> one{t};
    group_->allreduce_sum(one);
    count(AsyncOperation::Kind::allreduce, payload_bytes(t), ms_since(start));
  }
}

AsyncOperation Communicator::start_allreduce_sum(torch::Tensor tensor) {
  AsyncOperation operation;
  operation.kind = AsyncOperation::Kind::allreduce;
  operation.started = std::chrono::steady_clock::now();
  operation.pending = group_->allreduce_sum_async(tensor);
  operation.tensor = std::move(tensor);
  return operation;
}

AsyncOperation Communicator::start_send(torch::Tensor tensor, int64_t to, int tag) {
  AsyncOperation operation;
  operation.kind = AsyncOperation::Kind::send;
  operation.started = std::chrono::steady_clock::now();
  operation.pending = group_->send_async(tensor, static_cast<int>(to), tag);
  operation.tensor = std::move(tensor);
  return operation;
}

AsyncOperation Communicator::start_recv(torch::Tensor tensor, int64_t from, int tag) {
  AsyncOperation operation;
  operation.kind = AsyncOperation::Kind::recv;
  operation.started = std::chrono::steady_clock::now();
  operation.pending = group_->recv_async(tensor, static_cast<int>(from), tag);
  operation.tensor = std::move(tensor);
  return operation;
}

void Communicator::finish(AsyncOperation& operation) {
  // A send's completion cannot be observed without waiting for it (c10d's
  // send work has no future), and a pipeline waits for its sends only at the
  // end of the step: its duration is the time spent blocked on it.
  if (operation.kind == AsyncOperation::Kind::send)
    operation.started = std::chrono::steady_clock::now();
  operation.pending->wait();
  const double ms = std::chrono::duration<double, std::milli>(operation.pending->completed_at() -
                                                              operation.started)
                        .count();
  count(operation.kind, payload_bytes(operation.tensor), ms);
}

void Communicator::allreduce_mean(std::vector<torch::Tensor>& tensors) {
  allreduce_sum(tensors);
  for (auto& t : tensors) t.div_(static_cast<double>(size_));
}

void Communicator::broadcast(std::vector<torch::Tensor>& tensors, int64_t root) {
  for (auto& t : tensors) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<torch::Tensor> one{t};
    group_->broadcast(one, static_cast<int>(root));
    count(rank_ == root ? AsyncOperation::Kind::send : AsyncOperation::Kind::recv, payload_bytes(t),
          ms_since(start));
  }
}

void Communicator::barrier() {
  group_->barrier();
}

CommStats Communicator::take_stats() {
  std::lock_guard lock(shared_->mutex);
  return std::exchange(shared_->stats, CommStats{});
}

Communicator::Uncounted::Uncounted(Communicator& comm) : comm_(comm) {
  std::lock_guard lock(comm_.shared_->mutex);
  ++comm_.shared_->uncounted;
}

Communicator::Uncounted::~Uncounted() {
  std::lock_guard lock(comm_.shared_->mutex);
  --comm_.shared_->uncounted;
}

}  // namespace flotilla
