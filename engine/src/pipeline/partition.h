#pragma once
// Cutting a model's blocks into contiguous pipeline stages.

#include <cstdint>
#include <vector>

namespace flotilla {

// Blocks per stage that minimise the slowest stage's summed cost (each stage
// at least one block), as torchgpipe's balance_by_time does with measured
// times; of the cuts whose slowest stage is within 2 % of that least one (the
// costs are timings), the one whose lightest stage is heaviest.
std::vector<int64_t> balance_by_cost(const std::vector<double>& block_cost, int64_t stages);

// The first block of each stage, and the block count at the end: offsets[s]..offsets[s+1].
std::vector<int64_t> stage_offsets(const std::vector<int64_t>& balance);

}  // namespace flotilla
