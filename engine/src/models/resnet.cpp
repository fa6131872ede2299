#include "resnet.h"

#include "layers.h"

namespace flotilla::models {

BasicBlockImpl::BasicBlockImpl(int64_t in, int64_t planes, int64_t stride)
    : conv1(register_module("conv1", torch::nn::Conv2d(conv_options(in, planes, 3, stride)))),
      conv2(register_module("conv2", torch::nn::Conv2d(conv_options(planes, planes, 3)))),
      bn1(register_module("bn1", torch::nn::BatchNorm2d(planes))),
      bn2(register_module("bn2", torch::nn::BatchNorm2d(planes))),
      shortcut(register_module("shortcut", torch::nn::Sequential())) {
  if (stride != 1 || in != planes) {
    shortcut->push_back(torch::nn::Conv2d(conv_options(in, planes, 1, stride)));
    shortcut->push_back(torch::nn::BatchNorm2d(planes));
  }
}

torch::Tensor BasicBlockImpl::forward(torch::Tensor x) {
  auto out = torch::relu(bn1(conv1(x)));
  out = bn2(conv2(out));
  out = out + (shortcut->is_empty() ? x : shortcut->forward(x));
  return torch::relu(out);
}

torch::nn::Sequential resnet18(const ResNetOptions& o) {
  torch::nn::Sequential net;
  net->push_back("stem", ConvBnRelu(o.channels, 64, 3));
  int64_t in = 64;
  const int64_t widths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (int i = 0; i < 2; ++i) {
      const int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      net->push_back("layer" + std::to_string(stage + 1) + "_" + std::to_string(i),
                     BasicBlock(in, widths[stage], stride));
      in = widths[stage];
    }
  }
  net->push_back("head", PoolClassifier(512, o.classes, o.dropout));
  return net;
}

}  // namespace flotilla::models
