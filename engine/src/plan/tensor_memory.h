#pragma once
// Bytes held by tensors on one device, and the most held since a mark, for
// the planner's memory prediction (plan_prediction.cpp). On CUDA the caching
// allocator keeps both; on the CPU LibTorch keeps neither, so a watch puts a
// counting allocator in front of its CPU allocator for as long as it lives
// (c10::SetCPUAllocator). Counting at the allocator rather than by resident
// pages makes each figure exact: freed memory stays resident until glibc
// trims it, and a step's fullest moment lasts microseconds.

#include <torch/torch.h>

#include <cstdint>

namespace flotilla {

class TensorMemoryWatch {
 public:
  explicit TensorMemoryWatch(const torch::Device& device);
  ~TensorMemoryWatch();
  TensorMemoryWatch(const TensorMemoryWatch&) = delete;
  TensorMemoryWatch& operator=(const TensorMemoryWatch&) = delete;

  // Held now by tensors allocated while some watch was counting (on CUDA:
  // all of the device's).
  int64_t in_use() const;
  // The most held since the last mark (or since the watch began).
  int64_t peak() const;
  void mark();
  // The most held since the watch began, marks or not (CPU only; 0 on CUDA).
  int64_t highest() const;

 private:
  int gpu() const;  // the CUDA device's index
  torch::Device device_;
  c10::Allocator* previous_ = nullptr;
};

}  // namespace flotilla
