#pragma once
// MobileNetV2, CIFAR variant (stride 1 stem and first stages), as in
// kuangliu/pytorch-cifar that the distgpipe study trains; or with the paper's
// strides for ImageNet-sized inputs.

#include <torch/torch.h>

namespace flotilla::models {

struct MobileNetV2Options {
  int64_t channels = 3;
  int64_t classes = 10;
  double dropout = 0.0;
  // The paper's strides for 224x224 inputs (stem and second stage 2, as in
  // torchvision: 112x112 after the stem, 7x7 at the end), not CIFAR's 1.
  bool imagenet_strides = false;
};

class InvertedResidualImpl : public torch::nn::Module {
 public:
  InvertedResidualImpl(int64_t in, int64_t out, int64_t expansion, int64_t stride);
  torch::Tensor forward(torch::Tensor x);

 private:
  int64_t stride_;
  torch::nn::Conv2d expand{nullptr}, depthwise{nullptr}, project{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential shortcut{nullptr};  // empty: identity
};
TORCH_MODULE(InvertedResidual);

torch::nn::Sequential mobilenet_v2(const MobileNetV2Options& options);

}  // namespace flotilla::models
