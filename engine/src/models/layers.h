#pragma once
// Building blocks shared by the models. Each block is one module with a plain
// forward(Tensor) so that a model is an ordered torch::nn::Sequential of them
// and a pipeline can cut it at any block boundary.

#include <torch/torch.h>

namespace flotilla::models {

torch::nn::Conv2dOptions conv_options(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
                                      int64_t groups = 1);

// conv -> batch norm -> ReLU
class ConvBnReluImpl : public torch::nn::Module {
 public:
  ConvBnReluImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(ConvBnRelu);

// global average pool -> flatten -> dropout -> linear
class PoolClassifierImpl : public torch::nn::Module {
 public:
  PoolClassifierImpl(int64_t features, int64_t classes, double dropout);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(PoolClassifier);

// Blocks [begin, end) of `blocks` applied to `x` in order: the part of a
// Sequential's forward left once its leading blocks' output is known.
torch::Tensor forward_blocks(torch::nn::Sequential& blocks, int64_t begin, int64_t end,
                             torch::Tensor x);

}  // namespace flotilla::models
