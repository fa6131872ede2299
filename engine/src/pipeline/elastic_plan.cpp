#include "pipeline/elastic_plan.h"

#include <algorithm>

#include "pipeline/partition.h"

namespace flotilla {

std::string ElasticLayout::describe() const {
  std::string cut;
  for (size_t s = 0; s < balance.size(); ++s) cut += (s ? "+" : "") + std::to_string(balance[s]);
  return std::to_string(stages) + "x" + std::to_string(replicas) + " [" + cut + "]";
}

std::vector<double> costs_with_frozen(const std::vector<BlockCost>& costs, int64_t frozen) {
  std::vector<double> cost;
  for (size_t b = 0; b < costs.size(); ++b)
    cost.push_back(static_cast<int64_t>(b) < frozen ? costs[b].forward_ms : costs[b].full_ms);
  return cost;
}

double slowest_stage(const std::vector<double>& cost, const std::vector<int64_t>& balance) {
  const auto offsets = stage_offsets(balance);
  double slowest = 0;
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    double stage = 0;
    for (int64_t b = offsets[s]; b < offsets[s + 1]; ++b) stage += cost.at(size_t(b));
    slowest = std::max(slowest, stage);
  }
  return slowest;
}

ElasticLayout next_elastic_layout(const std::vector<BlockCost>& costs, int64_t frozen,
                                  const ElasticLayout& current, double budget_ms) {
  const auto cost = costs_with_frozen(costs, frozen);
  ElasticLayout layout = current;
  while (layout.stages % 2 == 0) {
    ElasticLayout halved;
    halved.stages = layout.stages / 2;
    halved.replicas = layout.replicas * 2;
    halved.balance = balance_by_cost(cost, halved.stages);
    // A relative slack of 1e-9 so that equal costs summed in another order still fit.
    if (slowest_stage(cost, halved.balance) > budget_ms * (1 + 1e-9)) break;
    layout = std::move(halved);
  }
  return layout;
}

}  // namespace flotilla
