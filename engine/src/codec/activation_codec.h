#pragma once
// Compression of the activations (and their gradients) that cross a pipeline
// stage boundary. A payload is self-contained for a known element count: the
// receiver knows the shape it expects, so nothing but the codes and their
// dequantisation table travel.
//
// Wire format, little-endian: a table of 2^s (float min, float step) pairs,
// one per group (uniform: s = 0, one pair), then the codes of b + s bits each,
// packed LSB-first in element order with no padding between codes.

#include <torch/torch.h>

#include <memory>
#include <string>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

class ActivationCodec {
 public:
  virtual ~ActivationCodec() = default;
  // The whole wire payload for `values` (float32, any shape, contiguous or not, CPU or CUDA):
  // a 1-d uint8 tensor of exactly encoded_bytes(values.numel()) bytes, on values' device.
  // Throws std::invalid_argument naming the problem if values holds NaN or Inf.
  virtual torch::Tensor encode(const torch::Tensor& values) const = 0;
  // Inverse: `numel` float32 values (1-d, caller reshapes) on payload's device.
  virtual torch::Tensor decode(const torch::Tensor& payload, int64_t numel) const = 0;
  virtual int64_t encoded_bytes(int64_t numel) const = 0;
  virtual std::string describe() const = 0;  // e.g. "sort_quant b=6 s=2 (8 bits/value)"
};

// nullptr for CompressionMethod::none; throws ConfigError for impossible settings.
std::unique_ptr<ActivationCodec> make_codec(const CompressionConfig& config);

}  // namespace flotilla
