#pragma once
// Placeholder of the codec interface until the codec branch lands (same API).
#include <torch/torch.h>

#include <memory>
#include <string>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

class ActivationCodec {
 public:
  virtual ~ActivationCodec() = default;
  virtual torch::Tensor encode(const torch::Tensor& values) const = 0;
  virtual torch::Tensor decode(const torch::Tensor& payload, int64_t numel) const = 0;
  virtual int64_t encoded_bytes(int64_t numel) const = 0;
  virtual std::string describe() const = 0;
};

std::unique_ptr<ActivationCodec> make_codec(const CompressionConfig& config);

}  // namespace flotilla
