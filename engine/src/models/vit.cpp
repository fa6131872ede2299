#include "vit.h"

namespace flotilla::models {
namespace {

// torchvision's ViT normalises with eps 1e-6.
torch::nn::LayerNorm vit_norm(int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-6));
}

}  // namespace

PatchEmbeddingImpl::PatchEmbeddingImpl(const VitOptions& o)
    : project(register_module(
          "project",
          torch::nn::Conv2d(torch::nn::Conv2dOptions(o.channels, o.dim, o.patch).stride(o.patch)))),
      // Zero class token and N(0, 0.02) positions, as torchvision initialises them.
      class_token(register_parameter("class_token", torch::zeros({1, 1, o.dim}))),
      position(register_parameter(
          "position",
          torch::randn({1, 1 + (o.height / o.patch) * (o.width / o.patch), o.dim}) * 0.02)),
      dropout(register_module("dropout", torch::nn::Dropout(o.dropout))) {}

torch::Tensor PatchEmbeddingImpl::forward(torch::Tensor x) {
  // [B, dim, H/p, W/p] -> [B, patches, dim], patches in row-major order.
  x = project(x).flatten(2).transpose(1, 2);
  x = torch::cat({class_token.expand({x.size(0), -1, -1}), x}, 1);
  return dropout(x + position);
}

VitBlockImpl::VitBlockImpl(int64_t dim, int64_t heads, int64_t mlp_dim, double p)
    : norm1(register_module("norm1", vit_norm(dim))),
      norm2(register_module("norm2", vit_norm(dim))),
      attention(register_module("attention", SelfAttention(dim, heads, p))),
      fc1(register_module("fc1", torch::nn::Linear(dim, mlp_dim))),
      fc2(register_module("fc2", torch::nn::Linear(mlp_dim, dim))),
      dropout(register_module("dropout", torch::nn::Dropout(p))) {}

torch::Tensor VitBlockImpl::forward(torch::Tensor x) {
  x = x + dropout(attention(norm1(x)));
  return x + dropout(fc2(dropout(torch::gelu(fc1(norm2(x))))));
}

VitHeadImpl::VitHeadImpl(int64_t dim, int64_t classes)
    : norm(register_module("norm", vit_norm(dim))),
      fc(register_module("fc", torch::nn::Linear(dim, classes))) {}

torch::Tensor VitHeadImpl::forward(torch::Tensor x) {
  // LayerNorm is per token, so normalising the class token alone is the same.
  return fc(norm(x.select(1, 0)));
}

torch::nn::Sequential vit(const VitOptions& o) {
  torch::nn::Sequential net;
  net->push_back("embedding", PatchEmbedding(o));
  for (int64_t i = 0; i < o.depth; ++i)
    net->push_back("block" + std::to_string(i), VitBlock(o.dim, o.heads, o.mlp_dim, o.dropout));
  net->push_back("head", VitHead(o.dim, o.classes));
  return net;
}

}  // namespace flotilla::models
