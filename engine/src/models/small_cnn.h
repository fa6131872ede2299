#pragma once
// A small CNN for quick runs: two conv/pool blocks and two dense blocks.

#include <torch/torch.h>

namespace flotilla::models {

struct SmallCnnOptions {
  int64_t channels = 1;
  int64_t height = 28;
  int64_t width = 28;
  int64_t classes = 10;
  double dropout = 0.0;
};

// conv 3x3 -> ReLU -> max pool 2
class ConvPoolImpl : public torch::nn::Module {
 public:
  ConvPoolImpl(int64_t in, int64_t out);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Conv2d conv{nullptr};
};
TORCH_MODULE(ConvPool);

// flatten -> linear -> ReLU -> dropout
class DenseImpl : public torch::nn::Module {
 public:
  DenseImpl(int64_t in, int64_t out, double dropout);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Linear fc{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Dense);

torch::nn::Sequential small_cnn(const SmallCnnOptions& options);

}  // namespace flotilla::models
