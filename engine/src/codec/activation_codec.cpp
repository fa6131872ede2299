// Placeholder until the codec branch lands.
#include "codec/activation_codec.h"

namespace flotilla {
std::unique_ptr<ActivationCodec> make_codec(const CompressionConfig& config) {
  if (config.method == CompressionMethod::none) return nullptr;
  throw ConfigError({"compression.method: not yet"});
}
}  // namespace flotilla
