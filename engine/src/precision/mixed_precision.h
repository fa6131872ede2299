#pragma once
// The pieces of `precision: bf16 | fp16` besides autocast itself (which is
// torch_adapter.h's AutocastScope): the dtypes each precision computes and
// communicates in, fp16's dynamic loss scale, and channels_last.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

// float32, bfloat16 or float16.
torch::ScalarType compute_dtype(Precision precision);
// What DDP's gradient buckets are all-reduced in: the compute dtype where
// the process group can all-reduce it; for bf16 on a Gloo without bfloat16
// (LibTorch 1.13), float16, which takes the same 2 bytes a value.
torch::ScalarType gradient_wire_dtype(Precision precision, bool cuda);
// "float32", "bfloat16", "float16": how records name a dtype.
std::string dtype_name(torch::ScalarType dtype);

// The 4-d weights of `model` (convolutions) in NHWC memory order, and a
// batch of images likewise; other tensors are left as they are.
void to_channels_last(torch::nn::Module& model);
torch::Tensor to_channels_last(const torch::Tensor& images);

// fp16's dynamic loss scale, as torch.cuda.amp.GradScaler keeps it: the loss
// is multiplied by scale() before backward so that small gradients do not
// flush to zero in fp16, and the gradients are divided by it before the
// optimizer. A step whose gradients hold an inf or NaN is skipped and the
// scale halved; after `growth_interval` finite steps in a row it doubles.
// Disabled (bf16, fp32) its scale is 1 and every step is taken. Written out
// here: LibTorch has no C++ GradScaler, and the fused ATen ops the Python one
// calls (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_) have
// only CUDA kernels in 1.13, whose CPU runs use this class as well.
class LossScaler {
 public:
  explicit LossScaler(bool enabled, double initial_scale = 65536.0, int64_t growth_interval = 2000);

  bool enabled() const { return enabled_; }
  double scale() const { return enabled_ ? scale_ : 1.0; }

  // Divides each defined gradient of `parameters` by the scale and says
  // whether every one is finite. `agree` turns this rank's answer into every
  // rank's (true only if all are); null on one rank. Disabled: true, untouched.
  bool unscale(const std::vector<torch::Tensor>& parameters,
               const std::function<bool(bool)>& agree = nullptr);
  // After unscale(): the scale for the next step.
  void update(bool finite);

  int64_t skipped_steps() const { return skipped_; }

  // What a checkpoint keeps: the scale, the finite steps since it last
  // changed, the steps skipped.
  std::array<double, 3> state() const {
    return {scale_, static_cast<double>(good_steps_), static_cast<double>(skipped_)};
  }
  void restore(const std::array<double, 3>& state) {
    scale_ = state[0];
    good_steps_ = static_cast<int64_t>(state[1]);
    skipped_ = static_cast<int64_t>(state[2]);
  }

 private:
  bool enabled_;
  double scale_;
  int64_t growth_interval_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace flotilla
