#include "mobilenet_v2.h"

#include "layers.h"

namespace flotilla::models {

InvertedResidualImpl::InvertedResidualImpl(int64_t in, int64_t out, int64_t expansion,
                                           int64_t stride)
    : stride_(stride) {
  const int64_t planes = expansion * in;
  expand = register_module("expand", torch::nn::Conv2d(conv_options(in, planes, 1)));
  bn1 = register_module("bn1", torch::nn::BatchNorm2d(planes));
  depthwise = register_module("depthwise",
                              torch::nn::Conv2d(conv_options(planes, planes, 3, stride, planes)));
  bn2 = register_module("bn2", torch::nn::BatchNorm2d(planes));
  project = register_module("project", torch::nn::Conv2d(conv_options(planes, out, 1)));
  bn3 = register_module("bn3", torch::nn::BatchNorm2d(out));
  shortcut = register_module("shortcut", torch::nn::Sequential());
  if (stride == 1 && in != out) {
    shortcut->push_back(torch::nn::Conv2d(conv_options(in, out, 1)));
    shortcut->push_back(torch::nn::BatchNorm2d(out));
  }
}

torch::Tensor InvertedResidualImpl::forward(torch::Tensor x) {
  auto out = torch::relu(bn1(expand(x)));
  out = torch::relu(bn2(depthwise(out)));
  out = bn3(project(out));
  if (stride_ != 1) return out;
  return out + (shortcut->is_empty() ? x : shortcut->forward(x));
}

torch::nn::Sequential mobilenet_v2(const MobileNetV2Options& o) {
  struct Stage {
    int64_t expansion, out, blocks, stride;
  };
  // The stem's and the second stage's strides are 1 for 32x32 inputs (CIFAR variant).
  const int64_t reduced = o.imagenet_strides ? 2 : 1;
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, reduced}, {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2},      {6, 320, 1, 1}};
  torch::nn::Sequential net;
  net->push_back("stem", ConvBnRelu(o.channels, 32, 3, reduced));
  int64_t in = 32, index = 0;
  for (const auto& s : stages) {
    for (int64_t i = 0; i < s.blocks; ++i) {
      net->push_back("block" + std::to_string(index++),
                     InvertedResidual(in, s.out, s.expansion, i == 0 ? s.stride : 1));
      in = s.out;
    }
  }
  net->push_back("conv_last", ConvBnRelu(320, 1280, 1));
  net->push_back("head", PoolClassifier(1280, o.classes, o.dropout));
  return net;
}

}  // namespace flotilla::models
