#pragma once
// Everything that differs between LibTorch builds and versions (Debian's CPU
// 1.13, CUDA 2.x wheels) lives behind this header and its one .cpp: device
// availability, CUDA events and memory statistics, out-of-memory detection,
// autocast (mixed precision), and (with the distributed strategies) c10d
// process groups.

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace at {
class Tensor;
}
namespace c10 {
enum class ScalarType : int8_t;
}

namespace flotilla {

struct DistributedEnv;
class PendingCollective;

class PhaseTimer;

std::string torch_version();
// The running program's path (/proc/self/exe); empty where that cannot be read.
std::string engine_program();
// Whether this LibTorch was built with CUDA, and a GPU is visible.
bool cuda_compiled();
bool cuda_usable();
// GPUs this process sees (0 without CUDA).
int64_t visible_cuda_devices();

struct MemoryStats {
  int64_t allocated = 0;  // CUDA caching allocator, or the process's RSS on the CPU
  int64_t reserved = 0;
  int64_t peak = 0;
};
MemoryStats memory_stats(bool cuda, int device_index = 0);
// Starts memory_stats(true, device_index).peak again from what is allocated
// now. Does nothing where this LibTorch has no CUDA.
void reset_cuda_peak_memory(int device_index);

// Caps what LibTorch's CUDA caching allocator may hold on GPU `device_index`
// at `bytes` (its per-process memory fraction), so that allocating beyond it
// raises the out-of-memory error a full GPU would; `limits.memory_mb` on
// CUDA. Does nothing where this LibTorch has no CUDA.
void limit_cuda_memory(int device_index, int64_t bytes);

// nullptr where this LibTorch has no CUDA.
std::unique_ptr<PhaseTimer> make_cuda_event_timer();

// While one lives, this thread's forward passes on the CPU (or on CUDA) run
// under LibTorch's autocast to `dtype`: matrix products and convolutions in
// it, precision-sensitive operators in float32, parameters untouched (their
// casts are cached until the outermost scope ends, as torch.autocast does).
// float32 makes it a no-op. The C++ calls moved from cpu_/gpu_-named
// functions to per-device ones in LibTorch 2.4.
class AutocastScope {
 public:
  AutocastScope(bool cuda, c10::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool cuda_;
  bool active_;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_;
};

// Empty where autocast to `dtype` trains on this device (a convolution, a
// linear layer and their backward ran under it); otherwise LibTorch's reason,
// e.g. Debian's 1.13 has no float16 CPU kernels for them.
std::string autocast_problem(bool cuda, c10::ScalarType dtype);

// Whether this process's collectives all-reduce tensors of `dtype`: NCCL
// every floating dtype; Gloo bfloat16 only from LibTorch 2 on (1.13's says
// "Invalid scalar type"), found by trying it on a one-rank group.
bool allreduces(bool cuda, c10::ScalarType dtype);

// A c10d process group: Gloo on the CPU, NCCL on CUDA. Its base class, its
// construction and NCCL's presence differ between LibTorch versions; only
// torch_adapter.cpp sees them.
class ProcessGroupAdapter {
 public:
  static std::unique_ptr<ProcessGroupAdapter> connect(const DistributedEnv& env, bool cuda,
                                                      std::chrono::milliseconds timeout);
  virtual ~ProcessGroupAdapter() = default;
  // Each waits for completion.
  virtual void allreduce_sum(std::vector<at::Tensor>& tensors) = 0;
  virtual std::unique_ptr<PendingCollective> allreduce_sum_async(at::Tensor tensor) = 0;
  virtual std::unique_ptr<PendingCollective> send_async(at::Tensor tensor, int to, int tag) = 0;
  virtual std::unique_ptr<PendingCollective> recv_async(at::Tensor tensor, int from, int tag) = 0;
  // A group of `size` ranks over the same rendezvous, its keys prefixed with
  // `name`; only its members create it.
  virtual std::unique_ptr<ProcessGroupAdapter> subgroup(const std::string& name, int rank,
                                                        int size) = 0;
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
};

// While one lives, this process's CPU `uniform_` and `normal_` (what every
// module's reset_parameters() draws its initial weights with) leave their
// tensor as allocated: building a model then costs its allocations alone,
// not seconds of random numbers and page faults (RoBERTa-base: 125 M
// values). For planning, which needs the model's structure and shapes, never
// its values. Not for training, and one at a time: it replaces LibTorch's CPU
// kernels of those two operators process-wide until it ends.
class RandomInitialisationSkipped {
 public:
  RandomInitialisationSkipped();
  ~RandomInitialisationSkipped();
  RandomInitialisationSkipped(const RandomInitialisationSkipped&) = delete;
  RandomInitialisationSkipped& operator=(const RandomInitialisationSkipped&) = delete;

 private:
  struct Registration;
  std::unique_ptr<Registration> registration_;
};

// True for the allocation failures of every allocator (CUDA's
// c10::OutOfMemoryError, std::bad_alloc, LibTorch's CPU allocator error).
bool is_out_of_memory(const std::exception_ptr& error);
// The message a person needs, without LibTorch's C++ backtrace.
std::string error_message(const std::exception_ptr& error);

}  // namespace flotilla
