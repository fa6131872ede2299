#pragma once
// VGG-13 with batch norm, CIFAR variant, as in kuangliu/pytorch-cifar that
// the seeds train: ten 3x3 conv blocks in five stages of 64, 128, 256, 512,
// 512 channels, each stage ending in a 2x2 max pool, then one linear layer.
// 9,416,010 parameters for 3 channels and 10 classes.

#include <torch/torch.h>

namespace flotilla::models {

struct VggOptions {
  int64_t channels = 3;
  int64_t classes = 10;
  double dropout = 0.0;
};

// conv 3x3 -> batch norm -> ReLU [-> max pool 2x2]
class VggBlockImpl : public torch::nn::Module {
 public:
  VggBlockImpl(int64_t in, int64_t out, bool pool);
  torch::Tensor forward(torch::Tensor x);

 private:
  bool pool_;
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(VggBlock);

// 11 blocks: one per conv layer, the pools inside the last conv block of each
// stage, and the classifier.
torch::nn::Sequential vgg13(const VggOptions& options);

}  // namespace flotilla::models
