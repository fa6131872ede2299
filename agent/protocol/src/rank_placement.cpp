#include "flotilla/protocol/rank_placement.h"

#include <algorithm>

namespace flotilla {

RunLayout run_layout(const ExperimentConfig& config) {
  RunLayout layout;
  layout.world_size = config.world_size();
  layout.pipelined =
      config.strategy == Strategy::pipeline || config.strategy == Strategy::pipeline_ddp;
  if (layout.pipelined) {
    layout.replicas = std::max<int64_t>(1, config.replicas);
    layout.stages = layout.world_size / layout.replicas;
  } else {
    layout.replicas = layout.world_size;
  }
  return layout;
}

int64_t replica_batch_size(const ExperimentConfig& config) {
  if (config.batch_scope != BatchScope::global) return config.batch_size;
  const int64_t replicas = run_layout(config).replicas;
  return replicas > 0 ? config.batch_size / replicas : config.batch_size;
}

ExperimentConfig with_replica_batch(ExperimentConfig config) {
  config.batch_size = replica_batch_size(config);
  config.batch_scope = BatchScope::per_replica;
  return config;
}

RankPlacement place_rank(const ExperimentConfig& config, int64_t rank) {
  const auto layout = run_layout(config);
  const int64_t per_node = std::max<int64_t>(1, config.ranks_per_node);
  RankPlacement p;
  p.rank = rank;
  p.node_index = rank / per_node;
  // A SLURM run's ranks are all reached through its login node.
  if (config.slurm.enabled() && !config.nodes.empty())
    p.node = config.nodes.front();
  else if (p.node_index < static_cast<int64_t>(config.nodes.size()))
    p.node = config.nodes[p.node_index];
  p.local_rank = rank % per_node;
  p.stage = rank % layout.stages;
  p.replica = rank / layout.stages;
  return p;
}

std::vector<RankPlacement> rank_placements(const ExperimentConfig& config) {
  std::vector<RankPlacement> placements;
  for (int64_t rank = 0; rank < config.world_size(); ++rank)
    placements.push_back(place_rank(config, rank));
  return placements;
}

std::vector<int64_t> ranks_of_node(const ExperimentConfig& config, int64_t node_index) {
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < config.ranks_per_node; ++r)
    ranks.push_back(node_index * config.ranks_per_node + r);
  return ranks;
}

}  // namespace flotilla
