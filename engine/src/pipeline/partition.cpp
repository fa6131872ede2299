#include "pipeline/partition.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace flotilla {

std::vector<int64_t> balance_by_cost(const std::vector<double>& block_cost, int64_t stages) {
  const auto blocks = static_cast<int64_t>(block_cost.size());
  if (stages < 1 || stages > blocks)
    throw std::invalid_argument("cannot cut " + std::to_string(blocks) + " blocks into " +
                                std::to_string(stages) + " stages");
  std::vector<double> prefix(block_cost.size() + 1, 0.0);
  for (size_t i = 0; i < block_cost.size(); ++i) prefix[i + 1] = prefix[i] + block_cost[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s][b]: the least possible slowest stage putting the first b blocks into s stages.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(blocks + 1, kInf));
  std::vector<std::vector<int64_t>> cut(stages + 1, std::vector<int64_t>(blocks + 1, 0));
  best[0][0] = 0;
  for (int64_t s = 1; s <= stages; ++s)
    for (int64_t b = s; b <= blocks; ++b)
      for (int64_t a = s - 1; a < b; ++a) {
        const double slowest = std::max(best[s - 1][a], prefix[b] - prefix[a]);
        // Ties go to the later cut, which keeps earlier stages lighter.
        if (slowest <= best[s][b]) {
          best[s][b] = slowest;
          cut[s][b] = a;
        }
      }
  std::vector<int64_t> balance(stages);
  for (int64_t s = stages, b = blocks; s > 0; --s) {
    balance[s - 1] = b - cut[s][b];
    b = cut[s][b];
  }
  return balance;
}

std::vector<int64_t> stage_offsets(const std::vector<int64_t>& balance) {
  std::vector<int64_t> offsets{0};
  for (int64_t b : balance) offsets.push_back(offsets.back() + b);
  return offsets;
}

}  // namespace flotilla
