#pragma once
// DDP's gradient averaging with overlap, as PyTorch's Reducer does it: the
// trainable parameters are put into buckets of about `bucket_bytes` (the
// first of at most 1 MiB) in reverse registration order (roughly the order
// backward produces their gradients);
// a hook on each parameter's gradient accumulator counts the bucket down, and
// the moment a bucket's last gradient is written the bucket is flattened and
// its all-reduce starts, while backward goes on with earlier layers. finish()
// then only waits for what is still in flight.
//
// Our own bucketing on the process group rather than c10d's Reducer: the
// Reducer's constructor and its autograd plumbing change between LibTorch 1.13
// and 2.x, it is meant to be driven from Python's DDP module, and every byte
// and millisecond must pass through Flotilla's Communicator to be measured.
// Buckets are laid out by the parameters' (float32) bytes whatever dtype they
// travel in, so one model's buckets are the same in every precision.

#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "comm/communicator.h"

namespace flotilla {

class GradientBuckets {
 public:
  static constexpr int64_t kDefaultBucketBytes = 25 * 1024 * 1024;
  // torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES.
  static constexpr int64_t kFirstBucketBytes = 1024 * 1024;

  // Which parameters (by index, of `parameter_bytes`) go into each bucket, in
  // launch order: reverse parameter order, a bucket closed when the next
  // parameter would take it past `bucket_bytes` (the first past 1 MiB).
  static std::vector<std::vector<size_t>> assign(const std::vector<int64_t>& parameter_bytes,
                                                 int64_t bucket_bytes);

  // `parameters`: those that train (frozen ones are left out of all-reduce).
  // `wire_dtype`: what each bucket is all-reduced in. Below float32 (bf16,
  // fp16 runs) the gradients are averaged before they are sent, as PyTorch's
  // bf16/fp16 compression hooks do, so that the sum stays in range, and cast
  // back to float32 after: half the bytes on the wire. (The hooks cast, then
  // divide; here the division is in float32 and the value rounded once.)
  GradientBuckets(std::vector<torch::Tensor> parameters, Communicator& comm,
                  int64_t bucket_bytes = kDefaultBucketBytes,
                  torch::ScalarType wire_dtype = torch::kFloat32);
  ~GradientBuckets();  // removes the hooks
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // After backward: starts the buckets whose gradients did not all arrive
  // (unused parameters count as zero), waits for every bucket, and leaves each
  // parameter's gradient averaged over the ranks, as a view of its bucket.
  void finish();

  // While disarmed, gradients written are not counted as ready: a pipeline
  // accumulates over micro-batches and arms only for the last one's backward.
  void set_armed(bool armed) { armed_.store(armed); }

  size_t bucket_count() const { return buckets_.size(); }
  // Parameter indices of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_layout() const;
  // Buckets of the last step that started during backward, not in finish().
  int64_t started_during_backward() const { return last_started_during_backward_; }

 private:
  struct Bucket {
    std::vector<size_t> parameters;
    size_t waiting = 0;  // gradients not yet written this step
    std::optional<AsyncAllreduce> operation;
  };
  void gradient_ready(size_t parameter);
  void start(Bucket& bucket);

  std::vector<torch::Tensor> parameters_;
  Communicator& comm_;
  torch::ScalarType wire_dtype_;
  torch::Tensor ranks_;  // the world size as a 0-dim tensor: made once, not per bucket
  std::atomic<bool> armed_{true};
  std::vector<size_t> bucket_of_;
  std::vector<char> ready_;  // per parameter, this step
  std::vector<Bucket> buckets_;
  std::mutex mutex_;  // on GPU, hooks run on autograd's device threads
  int64_t started_during_backward_ = 0, last_started_during_backward_ = 0;
  bool finishing_ = false;
  struct Hook {
    std::shared_ptr<torch::autograd::Node> accumulator;
    uintptr_t key;
  };
  std::vector<Hook> hooks_;
  std::shared_ptr<std::atomic<GradientBuckets*>> self_;
};

}  // namespace flotilla
