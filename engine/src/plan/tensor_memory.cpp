#include "plan/tensor_memory.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "torch_adapter.h"

namespace flotilla {
namespace {

// What tensors from the counting allocator hold now, and the most since a
// mark: process-wide, as the allocator is.
std::atomic<int64_t> cpu_in_use{0}, cpu_peak{0}, cpu_highest{0};

void raise_to(std::atomic<int64_t>& most, int64_t now) {
  int64_t seen = most.load();
  while (now > seen && !most.compare_exchange_weak(seen, now)) {
  }
}

// Wraps the CPU allocator it was made with; each allocation is kept by its
// address with its size, so that frees after the watch has gone still count
// down, and the pointer is its own context, as LibTorch's raw_allocate
// (workspaces) demands. Lives as long as the process (a tensor may outlive
// any watch).
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t bytes) const override {
    auto inner = inner_->allocate(bytes);
    void* data = inner.get();
    const auto device = inner.device();
    if (!data) return inner;
    {
      std::lock_guard lock(mutex());
      live().emplace(data, Held{std::move(inner), static_cast<int64_t>(bytes)});
    }
    const int64_t now =
        cpu_in_use.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
    raise_to(cpu_peak, now);
    raise_to(cpu_highest, now);
    return {data, data, &release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  // Pure virtual from LibTorch 2.3 on; a plain member before.
  void copy_data(void* dest, const void* src, std::size_t count) const {
    std::memcpy(dest, src, count);
  }

 private:
  struct Held {
    c10::DataPtr inner;
    int64_t bytes;
  };
  static std::mutex& mutex() {
    static auto* m = new std::mutex;
    return *m;
  }
  static std::unordered_map<void*, Held>& live() {
    static auto* held = new std::unordered_map<void*, Held>;
    return *held;
  }
  static void release(void* data) {
    c10::DataPtr inner;  // frees the memory once the lock is let go
    {
      std::lock_guard lock(mutex());
      const auto it = live().find(data);
      if (it == live().end()) return;
      cpu_in_use.fetch_sub(it->second.bytes);
      inner = std::move(it->second.inner);
      live().erase(it);
    }
  }

  c10::Allocator* inner_;
};

CountingCpuAllocator& counting_allocator() {
  static auto* allocator = new CountingCpuAllocator(c10::GetCPUAllocator());
  return *allocator;
}

}  // namespace

TensorMemoryWatch::TensorMemoryWatch(const torch::Device& device) : device_(device) {
  if (device_.is_cuda()) {
    mark();
    return;
  }
  auto& counting = counting_allocator();
  previous_ = c10::GetCPUAllocator();
  if (previous_ != &counting) c10::SetCPUAllocator(&counting, /*priority=*/255);
  mark();
  cpu_highest.store(cpu_in_use.load());
}

TensorMemoryWatch::~TensorMemoryWatch() {
  if (previous_ && previous_ != &counting_allocator())
    c10::SetCPUAllocator(previous_, /*priority=*/255);
}

int TensorMemoryWatch::gpu() const {
  return device_.index() < 0 ? 0 : device_.index();
}

int64_t TensorMemoryWatch::in_use() const {
  return device_.is_cuda() ? memory_stats(true, gpu()).allocated : cpu_in_use.load();
}

int64_t TensorMemoryWatch::peak() const {
  return device_.is_cuda() ? memory_stats(true, gpu()).peak : cpu_peak.load();
}

int64_t TensorMemoryWatch::highest() const {
  return device_.is_cuda() ? 0 : cpu_highest.load();
}

void TensorMemoryWatch::mark() {
  if (device_.is_cuda())
    reset_cuda_peak_memory(gpu());
  else
    cpu_peak.store(cpu_in_use.load());
}

}  // namespace flotilla
