#pragma once
// Quantisation of one group of values (uniform: the whole tensor) into
// `bits`-bit codes: what the CPU path computes per value, and what the device
// path's tables are built from on the host, so both give the same codes.

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "codec/code_packing.h"  // FLOTILLA_ALWAYS_INLINE

namespace flotilla::codec {

// Quantisation of one group (uniform: the whole tensor) into `bits`-bit codes.
struct GroupQuantizer {
  float min = 0.0f, step = 0.0f;  // what the table sends
  float inverse_step = 0.0f;      // 0 for a constant group: every code is 0
  float max_code = 0.0f;

  GroupQuantizer() = default;
  GroupQuantizer(float lowest, float highest, int bits)
      // + 0: a -0 minimum is sent as +0, whichever zero the scan met first.
      : min(lowest + 0.0f), max_code(static_cast<float>((1 << bits) - 1)) {
    const double exact_step = (static_cast<double>(highest) - lowest) / max_code;
    step = static_cast<float>(std::min(exact_step, static_cast<double>(FLT_MAX)));
    if (step > 0.0f) inverse_step = static_cast<float>(std::min(1.0 / step, double{FLT_MAX}));
  }

  // x is at least min; x - min may overflow to +inf, which clamps to max_code.
  FLOTILLA_ALWAYS_INLINE uint32_t code(float x) const {
    const float scaled = (x - min) * inverse_step + 0.5f;
    return static_cast<uint32_t>(static_cast<int32_t>(std::min(scaled, max_code)));
  }
};

}  // namespace flotilla::codec
