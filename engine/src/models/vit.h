#pragma once
// Vision Transformer (Dosovitskiy et al.), laid out as torchvision's
// vit_b_16: a strided conv cuts the image into patches, a class token and
// learned position embeddings join them, pre-norm encoder blocks follow, and
// the class token's final LayerNorm feeds a linear head. With patch 16, dim
// 768, depth 12, heads 12, mlp 3072 on 224x224 images and 1000 classes it has
// torchvision's 86,567,656 parameters.

#include <torch/torch.h>

#include "attention.h"

namespace flotilla::models {

struct VitOptions {
  int64_t channels = 3;
  int64_t height = 32;  // height and width must be multiples of patch
  int64_t width = 32;
  int64_t classes = 10;
  int64_t patch = 4;
  int64_t dim = 128;
  int64_t depth = 6;
  int64_t heads = 4;
  int64_t mlp_dim = 256;
  double dropout = 0.0;
};

// [B, C, H, W] images -> [B, 1 + patches, dim] tokens, the class token first.
class PatchEmbeddingImpl : public torch::nn::Module {
 public:
  explicit PatchEmbeddingImpl(const VitOptions& options);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Conv2d project{nullptr};
  torch::Tensor class_token, position;
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(PatchEmbedding);

// Pre-norm encoder block: x + attention(LN(x)), then x + MLP(LN(x)).
class VitBlockImpl : public torch::nn::Module {
 public:
  VitBlockImpl(int64_t dim, int64_t heads, int64_t mlp_dim, double dropout);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  SelfAttention attention{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(VitBlock);

// [B, tokens, dim] -> [B, classes] from the class token.
class VitHeadImpl : public torch::nn::Module {
 public:
  VitHeadImpl(int64_t dim, int64_t classes);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(VitHead);

// depth + 2 blocks: patch embedding, one per encoder block, head.
torch::nn::Sequential vit(const VitOptions& options);

}  // namespace flotilla::models
