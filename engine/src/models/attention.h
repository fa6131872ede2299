#pragma once
// Multi-head self-attention on batch-first tensors [batch, length, dim],
// written with matmuls: torch::nn::MultiheadAttention is sequence-first and
// returns a tuple in LibTorch 1.13, and its options differ across versions.

#include <torch/torch.h>

namespace flotilla::models {

class SelfAttentionImpl : public torch::nn::Module {
 public:
  // dim must be a multiple of heads. dropout applies to the attention weights.
  SelfAttentionImpl(int64_t dim, int64_t heads, double dropout);
  torch::Tensor forward(torch::Tensor x);

 private:
  int64_t heads_;
  // Queries, keys and values in one projection (3 dim x dim plus biases, the
  // parameters of PyTorch's in_proj), then the output projection.
  torch::nn::Linear qkv{nullptr}, out{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(SelfAttention);

}  // namespace flotilla::models
