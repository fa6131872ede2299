#include "small_cnn.h"

namespace flotilla::models {

ConvPoolImpl::ConvPoolImpl(int64_t in, int64_t out)
    : conv(register_module("conv",
                           torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)))) {}

torch::Tensor ConvPoolImpl::forward(torch::Tensor x) {
  return torch::max_pool2d(torch::relu(conv(x)), 2);
}

DenseImpl::DenseImpl(int64_t in, int64_t out, double p)
    : fc(register_module("fc", torch::nn::Linear(in, out))),
      dropout(register_module("dropout", torch::nn::Dropout(p))) {}

torch::Tensor DenseImpl::forward(torch::Tensor x) {
  return dropout(torch::relu(fc(x.flatten(1))));
}

torch::nn::Sequential small_cnn(const SmallCnnOptions& o) {
  const int64_t flat = 64 * (o.height / 4) * (o.width / 4);
  torch::nn::Sequential net;
  net->push_back("conv1", ConvPool(o.channels, 32));
  net->push_back("conv2", ConvPool(32, 64));
  net->push_back("fc1", Dense(flat, 128, o.dropout));
  net->push_back("fc2", torch::nn::Linear(128, o.classes));
  return net;
}

}  // namespace flotilla::models
