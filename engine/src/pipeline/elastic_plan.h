#pragma once
// AutoPipe's decision (PipeTransformer, seed 000): as the frozen prefix
// grows, the blocks still training fit on fewer stages, and the ranks freed
// become replicas of more pipelines (AutoDP). Plain arithmetic on per-block
// costs every rank holds alike, so every rank decides alike.

#include <cstdint>
#include <string>
#include <vector>

namespace flotilla {

// One block's measured milliseconds for a micro-batch: forward alone (what a
// frozen block costs) and forward + backward (what a training block costs).
struct BlockCost {
  double forward_ms = 0;
  double full_ms = 0;
};

struct ElasticLayout {
  int64_t stages = 1;
  int64_t replicas = 1;
  std::vector<int64_t> balance;  // blocks per stage

  bool operator==(const ElasticLayout& other) const {
    return stages == other.stages && replicas == other.replicas && balance == other.balance;
  }
  bool operator!=(const ElasticLayout& other) const { return !(*this == other); }
  // "2x2 [5+5]": stages x replicas and the cut.
  std::string describe() const;
};

// Each block's cost with the whole model's first `frozen` blocks frozen.
std::vector<double> costs_with_frozen(const std::vector<BlockCost>& costs, int64_t frozen);
// The slowest stage's summed cost under `balance`.
double slowest_stage(const std::vector<double>& cost, const std::vector<int64_t>& balance);

// The layout to train in once `frozen` leading blocks are frozen, from
// `current` over the same ranks (stages x replicas): the pipeline is halved
// while the halved pipeline's slowest stage, cut by cost with frozen blocks
// at their forward cost, is no slower than `budget_ms` (the slowest stage of
// the pipeline as the run started). Each rank then does no more work per
// micro-batch, and holds no more, than it did at the start, while twice the
// replicas share the batch. `current` when no halving fits.
ElasticLayout next_elastic_layout(const std::vector<BlockCost>& costs, int64_t frozen,
                                  const ElasticLayout& current, double budget_ms);

}  // namespace flotilla
