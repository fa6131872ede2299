#pragma once
// A Transformer encoder laid out as RoBERTa (BERT's post-norm layers, GELU,
// learned positions) with a sequence-classification head, on int64 token ids
// [batch, length]. RoBERTa-base sizes by default: with 2 classes it has the
// 124,647,170 parameters of Hugging Face's RobertaForSequenceClassification.

#include <torch/torch.h>

#include "attention.h"

namespace flotilla::models {

struct TransformerEncoderOptions {
  int64_t vocab = 50265;
  int64_t hidden = 768;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t ffn = 3072;
  int64_t max_positions = 514;  // sequences of up to max_positions - 2 tokens
  int64_t classes = 2;
  double dropout = 0.0;  // RoBERTa trains with 0.1
};

// Token ids [B, L] -> LayerNorm(token + position + type embedding) [B, L, hidden].
class TokenEmbeddingImpl : public torch::nn::Module {
 public:
  explicit TokenEmbeddingImpl(const TransformerEncoderOptions& options);
  torch::Tensor forward(torch::Tensor ids);

 private:
  torch::nn::Embedding token{nullptr}, position{nullptr}, type{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(TokenEmbedding);

// Post-norm layer: x = LN(x + attention(x)), then LN(x + FFN(x)), FFN with GELU.
class EncoderLayerImpl : public torch::nn::Module {
 public:
  EncoderLayerImpl(int64_t hidden, int64_t heads, int64_t ffn, double dropout);
  torch::Tensor forward(torch::Tensor x);

 private:
  SelfAttention attention{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(EncoderLayer);

// RoBERTa's classification head: first token -> dense -> tanh -> linear.
class ClassificationHeadImpl : public torch::nn::Module {
 public:
  ClassificationHeadImpl(int64_t hidden, int64_t classes, double dropout);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Linear dense{nullptr}, out{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(ClassificationHead);

// layers + 2 blocks: embedding, one per encoder layer, head.
torch::nn::Sequential transformer_encoder(const TransformerEncoderOptions& options);

}  // namespace flotilla::models
