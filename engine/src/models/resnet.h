#pragma once
// ResNet-18, CIFAR variant (3x3 stem, no max pool), as in kuangliu/pytorch-cifar
// that the seeds train: 11,173,962 parameters for 10 classes.

#include <torch/torch.h>

namespace flotilla::models {

struct ResNetOptions {
  int64_t channels = 3;
  int64_t classes = 10;
  double dropout = 0.0;
};

class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t planes, int64_t stride);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential shortcut{nullptr};  // empty: identity
};
TORCH_MODULE(BasicBlock);

torch::nn::Sequential resnet18(const ResNetOptions& options);

}  // namespace flotilla::models
