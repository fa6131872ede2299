#include "attention.h"

#include <cmath>

namespace flotilla::models {

SelfAttentionImpl::SelfAttentionImpl(int64_t dim, int64_t heads, double p)
    : heads_(heads),
      qkv(register_module("qkv", torch::nn::Linear(dim, 3 * dim))),
      out(register_module("out", torch::nn::Linear(dim, dim))),
      dropout(register_module("dropout", torch::nn::Dropout(p))) {
  TORCH_CHECK(heads > 0 && dim % heads == 0, "attention: ", heads, " heads do not divide dim ",
              dim);
}

torch::Tensor SelfAttentionImpl::forward(torch::Tensor x) {
  const int64_t batch = x.size(0), length = x.size(1), dim = x.size(2);
  const int64_t head_dim = dim / heads_;
  // [batch, length, 3, heads, head_dim] -> [3, batch, heads, length, head_dim]
  auto qkv_heads = qkv(x).view({batch, length, 3, heads_, head_dim}).permute({2, 0, 3, 1, 4});
  // Scaling the queries (length x head_dim) is cheaper than the scores (length x length).
  auto q = qkv_heads[0] * (1.0 / std::sqrt(static_cast<double>(head_dim)));
  auto weights = torch::softmax(torch::matmul(q, qkv_heads[1].transpose(-2, -1)), -1);
  auto context = torch::matmul(dropout(weights), qkv_heads[2]);
  return out(context.transpose(1, 2).reshape({batch, length, dim}));
}

}  // namespace flotilla::models
