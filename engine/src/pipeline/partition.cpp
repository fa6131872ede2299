#include "pipeline/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace flotilla {

namespace {
// How far above the least slowest stage a cut may go for a heavier lightest one.
constexpr double kSlowestStageTolerance = 0.02;
}  // namespace

std::vector<int64_t> balance_by_cost(const std::vector<double>& block_cost, int64_t stages) {
  const auto blocks = static_cast<int64_t>(block_cost.size());
  if (stages < 1 || stages > blocks)
    throw std::invalid_argument("cannot cut " + std::to_string(blocks) + " blocks into " +
                                std::to_string(stages) + " stages");
  std::vector<double> prefix(block_cost.size() + 1, 0.0);
  for (size_t i = 0; i < block_cost.size(); ++i) prefix[i + 1] = prefix[i] + block_cost[i];
  const auto cost = [&prefix](int64_t a, int64_t b) {
    return prefix[size_t(b)] - prefix[size_t(a)];
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // First the least possible slowest stage: slowest[s][b] for the first b
  // blocks in s stages.
  std::vector<std::vector<double>> slowest(size_t(stages + 1),
                                           std::vector<double>(size_t(blocks + 1), kInf));
  slowest[0][0] = 0;
  for (int64_t s = 1; s <= stages; ++s)
    for (int64_t b = s; b <= blocks; ++b)
      for (int64_t a = s - 1; a < b; ++a)
        slowest[size_t(s)][size_t(b)] = std::min(
            slowest[size_t(s)][size_t(b)], std::max(slowest[size_t(s - 1)][size_t(a)], cost(a, b)));
  // Many cuts share that slowest stage, and the last one found could leave
  // the others lopsided ([1, 1, 1, 10, 1, 1, 1, 1] in 4: [3, 1, 3, 1]).
  // Of the cuts whose every stage is within the bound, the one whose lightest
  // stage is heaviest: lightest[s][b] for the first b blocks in s stages.
  // The bound is 2 % above the least slowest stage: block costs are timings,
  // good to a few percent, and a cut 0.1 % faster at its slowest stage could
  // leave a stage at half the others' (MobileNetV2 in 4: [3, 4, 8, 5], its
  // first stage 0.42x the rest, for [4, 7, 5, 4] within 1.2x).
  const double fastest = slowest[size_t(stages)][size_t(blocks)];
  const double bound = fastest * (1 + kSlowestStageTolerance) + 1e-12 * std::abs(fastest);
  std::vector<std::vector<double>> lightest(size_t(stages + 1),
                                            std::vector<double>(size_t(blocks + 1), -kInf));
  std::vector<std::vector<int64_t>> cut(size_t(stages + 1),
                                        std::vector<int64_t>(size_t(blocks + 1), -1));
  lightest[0][0] = kInf;
  for (int64_t s = 1; s <= stages; ++s)
    for (int64_t b = s; b <= blocks; ++b)
      for (int64_t a = s - 1; a < b; ++a) {
        if (lightest[size_t(s - 1)][size_t(a)] == -kInf || cost(a, b) > bound) continue;
        const double light = std::min(lightest[size_t(s - 1)][size_t(a)], cost(a, b));
        // Strictly heavier only: of equal cuts the earliest, deterministically.
        if (light > lightest[size_t(s)][size_t(b)]) {
          lightest[size_t(s)][size_t(b)] = light;
          cut[size_t(s)][size_t(b)] = a;
        }
      }
  if (cut[size_t(stages)][size_t(blocks)] < 0)
    throw std::logic_error("balance_by_cost: no cut within the slowest stage's bound");
  std::vector<int64_t> balance(static_cast<size_t>(stages));
  for (int64_t s = stages, b = blocks; s > 0; --s) {
    balance[size_t(s - 1)] = b - cut[size_t(s)][size_t(b)];
    b = cut[size_t(s)][size_t(b)];
  }
  return balance;
}

std::vector<int64_t> stage_offsets(const std::vector<int64_t>& balance) {
  std::vector<int64_t> offsets{0};
  for (int64_t b : balance) offsets.push_back(offsets.back() + b);
  return offsets;
}

}  // namespace flotilla
