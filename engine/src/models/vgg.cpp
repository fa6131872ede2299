#include "vgg.h"

#include "layers.h"

namespace flotilla::models {

VggBlockImpl::VggBlockImpl(int64_t in, int64_t out, bool pool)
    : pool_(pool),
      // The conv keeps its bias although batch norm follows, as kuangliu's
      // VGG does, so that the parameter count is the seeds'.
      conv(register_module("conv", torch::nn::Conv2d(conv_options(in, out, 3).bias(true)))),
      bn(register_module("bn", torch::nn::BatchNorm2d(out))) {}

torch::Tensor VggBlockImpl::forward(torch::Tensor x) {
  x = torch::relu(bn(conv(x)));
  if (!pool_) return x;
  // ceil_mode: 28x28 images shrink 14, 7, 4, 2, 1 instead of reaching 0 at
  // the fifth pool; on 32x32 (and any even size) it is the usual floor pool.
  return torch::max_pool2d(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, /*ceil_mode=*/true);
}

torch::nn::Sequential vgg13(const VggOptions& o) {
  const int64_t widths[] = {64, 128, 256, 512, 512};
  torch::nn::Sequential net;
  int64_t in = o.channels;
  for (int stage = 0; stage < 5; ++stage) {
    for (int i = 0; i < 2; ++i) {
      net->push_back("conv" + std::to_string(stage + 1) + "_" + std::to_string(i + 1),
                     VggBlock(in, widths[stage], /*pool=*/i == 1));
      in = widths[stage];
    }
  }
  // kuangliu's 1x1 average pool then flatten; the adaptive pool also takes
  // inputs larger than 32x32, whose last stage is more than 1x1.
  net->push_back("classifier", PoolClassifier(512, o.classes, o.dropout));
  return net;
}

}  // namespace flotilla::models
