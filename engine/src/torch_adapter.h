#pragma once
// Everything that differs between LibTorch builds and versions (Debian's CPU
// 1.13, CUDA 2.x wheels) lives behind this header and its one .cpp: device
// availability, CUDA events and memory statistics, out-of-memory detection,
// and (with the distributed strategies) c10d process groups.

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

namespace flotilla {

class PhaseTimer;

std::string torch_version();
// Whether this LibTorch was built with CUDA, and a GPU is visible.
bool cuda_compiled();
bool cuda_usable();

struct MemoryStats {
  int64_t allocated = 0;  // CUDA caching allocator, or the process's RSS on the CPU
  int64_t reserved = 0;
  int64_t peak = 0;
};
MemoryStats memory_stats(bool cuda, int device_index = 0);

// nullptr where this LibTorch has no CUDA.
std::unique_ptr<PhaseTimer> make_cuda_event_timer();

// True for the allocation failures of every allocator (CUDA's
// c10::OutOfMemoryError, std::bad_alloc, LibTorch's CPU allocator error).
bool is_out_of_memory(const std::exception_ptr& error);
// The message a person needs, without LibTorch's C++ backtrace.
std::string error_message(const std::exception_ptr& error);

}  // namespace flotilla
