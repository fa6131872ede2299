#pragma once
// Bit packing of fixed-width codes (1..32 bits), LSB-first in element order.
//
// Eight codes of W bits fill exactly W bytes, so the work goes by blocks of
// eight: blocks own disjoint byte ranges (they pack and unpack in parallel),
// and with W a compile-time constant every shift and flush inside a block is
// fixed, so the codes of a block are computed as one vectorisable loop.

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

// The per-value functors must inline into the block loops for those to
// vectorise; with a packer per width, GCC's growth limits otherwise refuse.
#if defined(__GNUC__) || defined(__clang__)
#define FLOTILLA_ALWAYS_INLINE __attribute__((always_inline))
#else
#define FLOTILLA_ALWAYS_INLINE
#endif

namespace flotilla::codec {

constexpr int kMaxCodeWidth = 32;

inline int64_t packed_bytes(int64_t count, int width) {
  return (count * width + 7) / 8;
}

namespace detail {

constexpr int64_t kBlock = 8;
constexpr int64_t kBlocksPerTask = 4096;  // 32 Ki values: amortises a thread hand-off

inline void store_u32_le(uint8_t* dst, uint32_t v) {
  for (int k = 0; k < 4; ++k) dst[k] = static_cast<uint8_t>(v >> (8 * k));
}

inline uint32_t load_u32_le(const uint8_t* src) {
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) v |= static_cast<uint32_t>(src[k]) << (8 * k);
  return v;
}

// Writes exactly W bytes.
template <int W>
FLOTILLA_ALWAYS_INLINE inline void pack_block(const uint32_t (&codes)[kBlock], uint8_t* dst) {
  uint64_t pending = 0;  // fewer than 32 bits between codes
  int pending_bits = 0;
#pragma GCC unroll 8
  for (int k = 0; k < kBlock; ++k) {
    pending |= static_cast<uint64_t>(codes[k]) << pending_bits;
    pending_bits += W;
    if (pending_bits >= 32) {
      store_u32_le(dst, static_cast<uint32_t>(pending));
      dst += 4;
      pending >>= 32;
      pending_bits -= 32;
    }
  }
  for (; pending_bits > 0; pending_bits -= 8, pending >>= 8) *dst++ = static_cast<uint8_t>(pending);
}

// Bytes unpack_block reads, in 4-byte loads: up to 3 past the block's W.
template <int W>
constexpr int64_t kBlockReadBytes = 4 * ((W + 3) / 4);

template <int W>
FLOTILLA_ALWAYS_INLINE inline void unpack_block(const uint8_t* src, uint32_t (&codes)[kBlock]) {
  constexpr uint64_t mask = (uint64_t{1} << W) - 1;
  uint64_t pending = 0;
  int pending_bits = 0;
#pragma GCC unroll 8
  for (int k = 0; k < kBlock; ++k) {
    if (pending_bits < W) {
      pending |= static_cast<uint64_t>(load_u32_le(src)) << pending_bits;
      src += 4;
      pending_bits += 32;
    }
    codes[k] = static_cast<uint32_t>(pending & mask);
    pending >>= W;
    pending_bits -= W;
  }
}

// Calls f(std::integral_constant<int, W>) for W == width, for W in [Low, High].
template <int Low, int High, class F>
void with_width(int width, const F& f) {
  if constexpr (Low <= High) {
    if (width == Low) return f(std::integral_constant<int, Low>{});
    with_width<Low + 1, High>(width, f);
  }
}

}  // namespace detail

// Writes packed_bytes(count, width) bytes to `out`, code_of(i) < 2^width for
// i in [0, count). width must lie in [1, MaxWidth]; a smaller MaxWidth
// instantiates fewer packers.
template <int MaxWidth = kMaxCodeWidth, class CodeOf>
void pack_codes(uint8_t* out, int64_t count, int width, const CodeOf& code_of) {
  using namespace detail;
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  with_width<1, MaxWidth>(width, [&](auto w) {
    constexpr int W = decltype(w)::value;
    at::parallel_for(0, blocks, kBlocksPerTask, [&](int64_t first_block, int64_t end_block) {
      const int64_t full_end = std::min(end_block, count / kBlock);
      uint32_t codes[kBlock];
      for (int64_t block = first_block; block < full_end; ++block) {
        const int64_t first = block * kBlock;
        for (int k = 0; k < kBlock; ++k) codes[k] = code_of(first + k);
        pack_block<W>(codes, out + block * W);
      }
      if (full_end < end_block) {  // the last, partial block: pack in a scratch block
        const int64_t first = full_end * kBlock;
        std::fill(std::begin(codes), std::end(codes), 0u);
        for (int64_t i = first; i < count; ++i) codes[i - first] = code_of(i);
        uint8_t scratch[W];
        pack_block<W>(codes, scratch);
        std::memcpy(out + full_end * W, scratch, packed_bytes(count - first, W));
      }
    });
  });
}

// Calls emit(i, code) for every i in [0, count) of a pack_codes output of
// packed_bytes(count, width) bytes; width in [1, MaxWidth].
template <int MaxWidth = kMaxCodeWidth, class Emit>
void unpack_codes(const uint8_t* in, int64_t count, int width, const Emit& emit) {
  using namespace detail;
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  const int64_t in_bytes = packed_bytes(count, width);
  with_width<1, MaxWidth>(width, [&](auto w) {
    constexpr int W = decltype(w)::value;
    // Blocks whose loads stay inside the payload; the rest go through a copy.
    const int64_t direct_blocks = in_bytes < kBlockReadBytes<W>
                                      ? 0
                                      : std::min(blocks, (in_bytes - kBlockReadBytes<W>) / W + 1);
    at::parallel_for(0, blocks, kBlocksPerTask, [&](int64_t first_block, int64_t end_block) {
      uint32_t codes[kBlock];
      for (int64_t block = first_block; block < end_block; ++block) {
        const int64_t first = block * kBlock;
        if (block < direct_blocks) {
          unpack_block<W>(in + block * W, codes);
        } else {
          uint8_t scratch[kBlockReadBytes<W>] = {};
          std::memcpy(scratch, in + block * W, std::min<int64_t>(W, in_bytes - block * W));
          unpack_block<W>(scratch, codes);
        }
        const int64_t in_block = std::min(kBlock, count - first);
        if (in_block == kBlock) {
          for (int k = 0; k < kBlock; ++k) emit(first + k, codes[k]);
        } else {
          for (int k = 0; k < in_block; ++k) emit(first + k, codes[k]);
        }
      }
    });
  });
}

}  // namespace flotilla::codec
