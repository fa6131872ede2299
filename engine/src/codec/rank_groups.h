#pragma once
// Sort quantisation's grouping: 2^s groups of equal count by rank order,
// found by selection (no full sort: see rank_groups.cpp) and then looked up
// element by element.
//
// A value and its index form one 64-bit rank key, so ties are broken by index
// and every group boundary is a single integer comparison.

#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codec/code_packing.h"  // FLOTILLA_ALWAYS_INLINE

namespace flotilla::codec {

// Orders finite floats as their values do (-0 just below +0).
inline uint32_t order_key(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

inline float from_order_key(uint32_t key) {
  const uint32_t bits = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// Adding +0 turns -0 into +0: equal values tie, whatever their sign bit.
inline uint64_t rank_key(float x, int64_t index) {
  return static_cast<uint64_t>(order_key(x + 0.0f)) << 32 | static_cast<uint64_t>(index);
}

// Bucket counts and gather cursors are 32-bit (and an index fits a key's low half).
constexpr int64_t kMaxRankedValues = INT32_MAX;

struct RankGroups {
  // first_key[g]: rank key of the element at group g's first rank (g >= 1;
  // first_key[0] is unused). An empty group shares its successor's key.
  std::vector<uint64_t> first_key;
  std::vector<float> min, max;  // 0 for an empty group
};

// Group g holds the ranks [g*count/2^s, (g+1)*count/2^s), so sizes differ by at
// most one. Values must be finite; count at most kMaxRankedValues (else
// std::invalid_argument).
RankGroups split_by_rank(const float* values, int64_t count, int split_bits);

// The group of the element with rank key `key`, branch-free in s steps.
FLOTILLA_ALWAYS_INLINE inline int64_t group_of(const uint64_t* first_key, int split_bits,
                                               uint64_t key) {
  int64_t group = 0;
  for (int64_t step = (int64_t{1} << split_bits) >> 1; step > 0; step >>= 1)
    group += first_key[group + step] <= key ? step : 0;
  return group;
}

}  // namespace flotilla::codec
