#include "layers.h"

namespace flotilla::models {

torch::nn::Conv2dOptions conv_options(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                      int64_t groups) {
  return torch::nn::Conv2dOptions(in, out, kernel)
      .stride(stride)
      .padding(kernel / 2)
      .groups(groups)
      .bias(false);
}

ConvBnReluImpl::ConvBnReluImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride)
    : conv(register_module("conv", torch::nn::Conv2d(conv_options(in, out, kernel, stride)))),
      bn(register_module("bn", torch::nn::BatchNorm2d(out))) {}

torch::Tensor ConvBnReluImpl::forward(torch::Tensor x) {
  return torch::relu(bn(conv(x)));
}

PoolClassifierImpl::PoolClassifierImpl(int64_t features, int64_t classes, double p)
    : dropout(register_module("dropout", torch::nn::Dropout(p))),
      fc(register_module("fc", torch::nn::Linear(features, classes))) {}

torch::Tensor PoolClassifierImpl::forward(torch::Tensor x) {
  x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc(dropout(x));
}

torch::Tensor forward_blocks(torch::nn::Sequential& blocks, int64_t begin, int64_t end,
                             torch::Tensor x) {
  for (auto it = blocks->begin() + begin; it != blocks->begin() + end; ++it) x = it->forward(x);
  return x;
}

}  // namespace flotilla::models
