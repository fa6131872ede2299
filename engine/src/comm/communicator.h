#pragma once
// The engine's one communication layer: every collective and point-to-point
// operation goes through it, and it counts the payload bytes, the operations
// and the time each rank spends in them.

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <mutex>

#include "flotilla/engine/training.h"

namespace flotilla {

struct CommStats {
  int64_t bytes_sent = 0;
  int64_t bytes_recv = 0;
  int64_t operations = 0;
  double busy_ms = 0;          // summed duration of the operations
  double allreduce_bytes = 0;  // payload of all-reduces, for bus bandwidth
  double allreduce_ms = 0;
};

class ProcessGroupAdapter;  // c10d, behind torch_adapter.cpp

// A collective under way; c10d's Work behind torch_adapter.cpp.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
  // When the operation completed (known once wait() returned).
  virtual std::chrono::steady_clock::time_point completed_at() const = 0;
};

// An all-reduce started by Communicator::start_allreduce_sum, finished by finish().
struct AsyncAllreduce {
  torch::Tensor tensor;
  std::chrono::steady_clock::time_point started;
  std::unique_ptr<PendingCollective> pending;
};

class Communicator {
 public:
  // Joins the rendezvous at env.master_addr:master_port (rank 0 serves the
  // store) with Gloo, or NCCL when `cuda`. Throws with the address on timeout.
  static std::unique_ptr<Communicator> connect(const DistributedEnv& env, bool cuda,
                                               std::chrono::milliseconds timeout);
  ~Communicator();

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }

  // In place, blocking: the sum over ranks, divided by their number for the mean.
  void allreduce_sum(std::vector<torch::Tensor>& tensors);
  void allreduce_mean(std::vector<torch::Tensor>& tensors);
  // In place, without waiting: the sum over ranks lands in `tensor` by finish().
  AsyncAllreduce start_allreduce_sum(torch::Tensor tensor);
  // Waits for it and counts it; busy time runs from its start to its completion.
  void finish(AsyncAllreduce& operation);
  void broadcast(std::vector<torch::Tensor>& tensors, int64_t root);
  void barrier();

  // What was counted since the last call.
  CommStats take_stats();

 private:
  Communicator(std::unique_ptr<ProcessGroupAdapter> group, int64_t rank, int64_t size);

  std::unique_ptr<ProcessGroupAdapter> group_;
  int64_t rank_, size_;
  std::mutex stats_mutex_;  // asynchronous operations may be started from autograd's threads
  CommStats stats_;
};

}  // namespace flotilla
