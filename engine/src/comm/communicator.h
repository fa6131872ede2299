#pragma once
// The engine's one communication layer: every collective and point-to-point
// operation goes through it, and it counts the payload bytes, the operations
// and the time each rank spends in them.

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "flotilla/engine/training.h"

namespace flotilla {

struct CommStats {
  int64_t bytes_sent = 0;
  int64_t bytes_recv = 0;
  int64_t operations = 0;
  double busy_ms = 0;          // summed duration of the operations
  double allreduce_bytes = 0;  // payload of all-reduces, for bus bandwidth
  double allreduce_ms = 0;
  int64_t allreduce_ranks = 0;  // size of the group the all-reduces ran in
};

class ProcessGroupAdapter;  // c10d, behind torch_adapter.cpp

// An operation under way; c10d's Work behind torch_adapter.cpp.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
  // When the operation completed (known once wait() returned).
  virtual std::chrono::steady_clock::time_point completed_at() const = 0;
};

// An operation started without waiting, counted when Communicator::finish() waits for it.
struct AsyncOperation {
  enum class Kind { allreduce, send, recv };
  Kind kind = Kind::allreduce;
  torch::Tensor tensor;  // kept alive until the operation is finished
  std::chrono::steady_clock::time_point started;
  std::unique_ptr<PendingCollective> pending;
};
using AsyncAllreduce = AsyncOperation;

class Communicator {
 public:
  // Joins the rendezvous at env.master_addr:master_port (rank 0 serves the
  // store) with Gloo, or NCCL when `cuda`. Throws with the address on timeout.
  static std::unique_ptr<Communicator> connect(const DistributedEnv& env, bool cuda,
                                               std::chrono::milliseconds timeout);
  ~Communicator();

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }

  // A group of some of this group's ranks (`members`, ascending; this rank
  // among them) under `name`, which every member passes alike. Its traffic is
  // counted with this communicator's.
  std::unique_ptr<Communicator> subgroup(const std::string& name,
                                         const std::vector<int64_t>& members);

  // In place, blocking: the sum over ranks, divided by their number for the mean.
  void allreduce_sum(std::vector<torch::Tensor>& tensors);
  void allreduce_mean(std::vector<torch::Tensor>& tensors);
  // In place, without waiting: the sum over ranks lands in `tensor` by finish().
  AsyncOperation start_allreduce_sum(torch::Tensor tensor);
  // Point to point, without waiting. A receive fills `tensor` (of the size the
  // sender sends) by finish(). Messages between two ranks with one tag arrive
  // in the order they were sent.
  AsyncOperation start_send(torch::Tensor tensor, int64_t to, int tag);
  AsyncOperation start_recv(torch::Tensor tensor, int64_t from, int tag);
  // Waits for it and counts it; busy time runs from its start to its completion.
  void finish(AsyncOperation& operation);
  void broadcast(std::vector<torch::Tensor>& tensors, int64_t root);
  void barrier();

  // What was counted since the last call.
  CommStats take_stats();

  // While one lives, nothing is counted: the engine's own bookkeeping
  // (accuracy sums, freezing decisions) is not training traffic.
  class Uncounted {
   public:
    explicit Uncounted(Communicator& comm);
    ~Uncounted();

   private:
    Communicator& comm_;
  };

 private:
  struct Shared {
    std::mutex mutex;  // asynchronous operations may finish on autograd's threads
    CommStats stats;
    int uncounted = 0;
  };
  Communicator(std::unique_ptr<ProcessGroupAdapter> group, int64_t rank, int64_t size,
               std::shared_ptr<Shared> shared);
  void count(AsyncOperation::Kind kind, int64_t bytes, double ms, int64_t operations = 1);

  std::unique_ptr<ProcessGroupAdapter> group_;
  int64_t rank_, size_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace flotilla
