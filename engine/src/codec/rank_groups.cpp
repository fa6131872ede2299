#include "codec/rank_groups.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

namespace flotilla::codec {
namespace {

// Radix selection: a histogram of the rank keys' top bits tells which bucket
// holds each wanted rank, so only those buckets' members are gathered and
// selected among. Three streaming passes, where s levels of nth_element over
// all n keys measured about 10 ns per key and level.

constexpr int64_t kValuesPerChunk = 256 * 1024;

// Enough buckets that a smooth distribution leaves few values in each, few
// enough that the counts stay small beside the data (about n/32 of them).
int bucket_bits_for(int64_t count) {
  int bits = 0;
  while ((int64_t{1} << bits) < count) ++bits;
  return std::clamp(bits - 5, 6, 16);
}

// Bucket counts per chunk of the input, so that chunks count and gather in
// parallel; `slots` later becomes each chunk's gather cursors.
struct ChunkedBuckets {
  const float* values;
  int64_t count, chunks, buckets;
  int shift;
  std::vector<uint32_t> slots;             // [chunk][bucket]
  std::vector<int64_t> bucket_first_rank;  // buckets + 1 entries

  ChunkedBuckets(const float* values_, int64_t count_)
      : values(values_),
        count(count_),
        chunks(
            std::clamp<int64_t>(count_ / kValuesPerChunk, 1, std::max(1, at::get_num_threads()))),
        buckets(int64_t{1} << bucket_bits_for(count_)),
        shift(64 - bucket_bits_for(count_)),
        slots(chunks * buckets, 0),
        bucket_first_rank(buckets + 1, 0) {}

  int64_t bucket_of(uint64_t key) const { return static_cast<int64_t>(key >> shift); }
  int64_t chunk_begin(int64_t chunk) const { return chunk * count / chunks; }
  int64_t bucket_of_rank(int64_t rank) const {
    return std::upper_bound(bucket_first_rank.begin(), bucket_first_rank.end(), rank) -
           bucket_first_rank.begin() - 1;
  }
  int64_t bucket_size(int64_t bucket) const {
    return bucket_first_rank[bucket + 1] - bucket_first_rank[bucket];
  }

  void count_members() {
    at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        uint32_t* counts = slots.data() + c * buckets;
        for (int64_t i = chunk_begin(c); i < chunk_begin(c + 1); ++i)
          ++counts[bucket_of(rank_key(values[i], i))];
      }
    });
    for (int64_t b = 0; b < buckets; ++b) {
      int64_t members = 0;
      for (int64_t c = 0; c < chunks; ++c) members += slots[c * buckets + b];
      bucket_first_rank[b + 1] = bucket_first_rank[b] + members;
    }
  }

  // The keys of the `gathered` buckets, bucket after bucket, each bucket's in
  // index order; candidates_begin[b] is where bucket b's keys start.
  std::unique_ptr<uint64_t[]> gather(const std::vector<char>& gathered,
                                     std::vector<int64_t>& candidates_begin) {
    candidates_begin.assign(buckets, 0);
    int64_t total = 0;
    for (int64_t b = 0; b < buckets; ++b) {
      candidates_begin[b] = total;
      if (!gathered[b]) continue;
      for (int64_t c = 0; c < chunks; ++c) {
        uint32_t& slot = slots[c * buckets + b];
        const uint32_t members = slot;
        slot = static_cast<uint32_t>(total);
        total += members;
      }
    }
    // No branch per value: the key of a bucket that is not gathered goes to a
    // scratch slot past the candidates, and that cursor stays there. (ReLU's
    // zeros, a third to a half of the values, made a branch mispredict often.)
    const uint32_t scratch = static_cast<uint32_t>(total);
    for (int64_t b = 0; b < buckets; ++b)
      if (!gathered[b])
        for (int64_t c = 0; c < chunks; ++c) slots[c * buckets + b] = scratch;
    // Uninitialised on purpose: the gather writes every candidate.
    std::unique_ptr<uint64_t[]> candidates(new uint64_t[total + 1]);
    at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        uint32_t* cursors = slots.data() + c * buckets;
        for (int64_t i = chunk_begin(c); i < chunk_begin(c + 1); ++i) {
          const uint64_t key = rank_key(values[i], i);
          uint32_t& cursor = cursors[bucket_of(key)];
          const uint32_t at = cursor;
          candidates[at] = key;
          cursor = at + (at != scratch);
        }
      }
    });
    return candidates;
  }
};

// Places the keys of the ascending ranks [rank, rank_end) (counted from
// `first`, which has rank first_rank) and stores them in `key_of`: the middle
// rank first, then each side within its half, so m ranks among n keys cost
// O(n log m) rather than O(n m).
void select_ranks(uint64_t* first, uint64_t* last, const int64_t* rank, const int64_t* rank_end,
                  int64_t first_rank, uint64_t* key_of) {
  if (rank == rank_end) return;
  const int64_t* middle = rank + (rank_end - rank) / 2;
  uint64_t* nth = first + (*middle - first_rank);
  std::nth_element(first, nth, last);
  key_of[middle - rank] = *nth;
  select_ranks(first, nth, rank, middle, first_rank, key_of);
  select_ranks(nth + 1, last, middle + 1, rank_end, *middle + 1, key_of + (middle - rank) + 1);
}

// The rank keys at the given ascending, distinct ranks.
std::vector<uint64_t> keys_at_ranks(const float* values, int64_t count,
                                    const std::vector<int64_t>& ranks) {
  ChunkedBuckets buckets(values, count);
  buckets.count_members();

  std::vector<int64_t> rank_bucket(ranks.size());
  std::vector<char> gathered(buckets.buckets, 0);
  for (size_t r = 0; r < ranks.size(); ++r) {
    rank_bucket[r] = buckets.bucket_of_rank(ranks[r]);
    gathered[rank_bucket[r]] = 1;
  }
  std::vector<int64_t> candidates_begin;
  const auto candidates = buckets.gather(gathered, candidates_begin);

  std::vector<size_t> runs;  // where each bucket's ranks start in `ranks`, then the end
  for (size_t r = 0; r < ranks.size(); ++r)
    if (r == 0 || rank_bucket[r] != rank_bucket[r - 1]) runs.push_back(r);
  runs.push_back(ranks.size());
  std::vector<uint64_t> keys(ranks.size());
  at::parallel_for(0, static_cast<int64_t>(runs.size()) - 1, 1, [&](int64_t begin, int64_t end) {
    for (int64_t run = begin; run < end; ++run) {
      const int64_t b = rank_bucket[runs[run]];
      uint64_t* first = candidates.get() + candidates_begin[b];
      select_ranks(first, first + buckets.bucket_size(b), ranks.data() + runs[run],
                   ranks.data() + runs[run + 1], buckets.bucket_first_rank[b],
                   keys.data() + runs[run]);
    }
  });
  return keys;
}

float value_of(uint64_t rank_key) {
  return from_order_key(static_cast<uint32_t>(rank_key >> 32));
}

}  // namespace

RankGroups split_by_rank(const float* values, int64_t count, int split_bits) {
  const int64_t groups = int64_t{1} << split_bits;
  RankGroups result{std::vector<uint64_t>(groups, 0), std::vector<float>(groups, 0.0f),
                    std::vector<float>(groups, 0.0f)};
  if (count == 0) return result;
  if (count > kMaxRankedValues)
    throw std::invalid_argument("activation codec: sort_quant ranks at most " +
                                std::to_string(kMaxRankedValues) + " values, got " +
                                std::to_string(count));

  const auto first_rank = [&](int64_t group) { return group * count / groups; };
  // Each non-empty group needs its first rank (its minimum and boundary) and
  // its last (its maximum).
  std::vector<int64_t> ranks;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = first_rank(g), last = first_rank(g + 1) - 1;
    if (last < first) continue;
    ranks.push_back(first);
    if (last != first) ranks.push_back(last);
  }
  const std::vector<uint64_t> keys = keys_at_ranks(values, count, ranks);

  for (int64_t g = 0, r = 0; g < groups; ++g) {
    const int64_t first = first_rank(g), last = first_rank(g + 1) - 1;
    if (last < first) continue;
    const uint64_t lowest = keys[r++];
    const uint64_t highest = last != first ? keys[r++] : lowest;
    result.first_key[g] = lowest;
    result.min[g] = value_of(lowest);
    result.max[g] = value_of(highest);
  }
  // The last group is never empty; an empty one starts where its successor does.
  for (int64_t g = groups - 2; g > 0; --g)
    if (first_rank(g) == first_rank(g + 1)) result.first_key[g] = result.first_key[g + 1];
  result.first_key[0] = 0;
  return result;
}

}  // namespace flotilla::codec
