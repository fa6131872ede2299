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
// selected among. A handful of streaming passes instead of s passes of
// nth_element over all n keys (which cost about 10 ns per key and pass).

constexpr int64_t kValuesPerChunk = 256 * 1024;

// Enough buckets that a smooth distribution leaves few values in each, few
// enough that the counts stay small beside the data (about n/32 of them).
int bucket_bits_for(int64_t count) {
  int bits = 0;
  while ((int64_t{1} << bits) < count) ++bits;
  return std::clamp(bits - 5, 6, 16);
}

// The ranks whose elements the groups need: each group's first (its minimum
// and boundary) and last (its maximum), ascending and distinct.
std::vector<int64_t> boundary_ranks(int64_t count, int64_t groups) {
  std::vector<int64_t> ranks;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = g * count / groups, end = (g + 1) * count / groups;
    if (first == end) continue;
    ranks.push_back(first);
    if (end - 1 != first) ranks.push_back(end - 1);
  }
  return ranks;
}

// Places the keys of the ascending ranks [rank, rank_end) (ranks counted from
// `first`) and stores them in `key_of`: the middle rank first, then each side
// on its own half, so m ranks cost O(n log m) rather than O(n m).
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

  const int shift = 64 - bucket_bits_for(count);
  const int64_t buckets = int64_t{1} << (64 - shift);
  const auto bucket_of = [shift](uint64_t key) { return static_cast<int64_t>(key >> shift); };

  // Counts per chunk of the input, so that chunks count (and later gather) in parallel.
  const int64_t chunks =
      std::clamp<int64_t>(count / kValuesPerChunk, 1, std::max(1, at::get_num_threads()));
  const auto chunk_begin = [&](int64_t chunk) { return chunk * count / chunks; };
  std::vector<uint32_t> slots(chunks * buckets, 0);  // counts, then gather cursors
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      uint32_t* counts = slots.data() + c * buckets;
      for (int64_t i = chunk_begin(c); i < chunk_begin(c + 1); ++i)
        ++counts[bucket_of(rank_key(values[i], i))];
    }
  });

  const std::vector<int64_t> ranks = boundary_ranks(count, groups);
  std::vector<int64_t> bucket_first_rank(buckets + 1, 0);
  for (int64_t b = 0; b < buckets; ++b) {
    int64_t members = 0;
    for (int64_t c = 0; c < chunks; ++c) members += slots[c * buckets + b];
    bucket_first_rank[b + 1] = bucket_first_rank[b] + members;
  }
  std::vector<int64_t> rank_bucket(ranks.size());
  std::vector<char> gathered(buckets, 0);
  for (size_t r = 0; r < ranks.size(); ++r) {
    rank_bucket[r] =
        std::upper_bound(bucket_first_rank.begin(), bucket_first_rank.end(), ranks[r]) -
        bucket_first_rank.begin() - 1;
    gathered[rank_bucket[r]] = 1;
  }

  // Candidates: the members of the gathered buckets, bucket after bucket, each
  // bucket's in index order (chunk after chunk).
  std::vector<int64_t> candidates_begin(buckets, 0);
  int64_t candidates_count = 0;
  for (int64_t b = 0; b < buckets; ++b) {
    candidates_begin[b] = candidates_count;
    for (int64_t c = 0; c < chunks; ++c) {
      uint32_t& slot = slots[c * buckets + b];
      const uint32_t members = slot;
      slot = static_cast<uint32_t>(candidates_count);
      if (gathered[b]) candidates_count += members;
    }
  }
  // The gather has no branch: a key of a bucket that is not gathered goes to
  // a scratch slot past the candidates, and its cursor stays there. (ReLU's
  // zeros, a third to a half of the values, made a branch mispredict often.)
  const uint32_t scratch = static_cast<uint32_t>(candidates_count);
  for (int64_t b = 0; b < buckets; ++b)
    if (!gathered[b])
      for (int64_t c = 0; c < chunks; ++c) slots[c * buckets + b] = scratch;
  // Uninitialised on purpose: the gather writes every candidate.
  std::unique_ptr<uint64_t[]> candidates(new uint64_t[candidates_count + 1]);
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

  // Select the wanted ranks bucket by bucket; buckets are independent.
  std::vector<size_t> runs;  // first index into `ranks` of each bucket's run
  for (size_t r = 0; r < ranks.size(); ++r)
    if (r == 0 || rank_bucket[r] != rank_bucket[r - 1]) runs.push_back(r);
  runs.push_back(ranks.size());
  std::vector<uint64_t> rank_key_of(ranks.size());
  at::parallel_for(0, static_cast<int64_t>(runs.size()) - 1, 1, [&](int64_t begin, int64_t end) {
    for (int64_t run = begin; run < end; ++run) {
      const int64_t b = rank_bucket[runs[run]];
      uint64_t* first = candidates.get() + candidates_begin[b];
      uint64_t* last = first + (bucket_first_rank[b + 1] - bucket_first_rank[b]);
      select_ranks(first, last, ranks.data() + runs[run], ranks.data() + runs[run + 1],
                   bucket_first_rank[b], rank_key_of.data() + runs[run]);
    }
  });

  size_t r = 0;  // boundary_ranks' order: per non-empty group, first then last
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = g * count / groups, end = (g + 1) * count / groups;
    if (first == end) continue;
    const uint64_t lowest = rank_key_of[r];
    const uint64_t highest = end - 1 != first ? rank_key_of[r + 1] : lowest;
    r += end - 1 != first ? 2 : 1;
    result.first_key[g] = lowest;
    result.min[g] = from_order_key(static_cast<uint32_t>(lowest >> 32));
    result.max[g] = from_order_key(static_cast<uint32_t>(highest >> 32));
  }
  // The last group is never empty; an empty one starts where its successor does.
  for (int64_t g = groups - 2; g > 0; --g)
    if (g * count / groups == (g + 1) * count / groups)
      result.first_key[g] = result.first_key[g + 1];
  result.first_key[0] = 0;
  return result;
}

}  // namespace flotilla::codec
