#pragma once
// Where each rank of a run goes and what it does, one rule for every program:
// global ranks fill the config's nodes in order, ranks_per_node each (rank 0
// on the first node), and a pipelined run's rank r is stage r % stages of
// replica r / stages (rank = replica x stages + stage), so that with
// ranks_per_node = stages each node holds one whole pipeline.

#include <cstdint>
#include <string>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

struct RunLayout {
  int64_t world_size = 1;
  int64_t stages = 1;    // pipeline stages of each replica; 1 unless pipelined
  int64_t replicas = 1;  // copies of the model that train on their own shard of the data
  bool pipelined = false;
};
RunLayout run_layout(const ExperimentConfig& config);

// The samples each data-parallel replica trains a step: batch_size, or with
// batch_scope global batch_size / replicas (the validator has checked that
// it divides).
int64_t replica_batch_size(const ExperimentConfig& config);
// The config as a rank trains it: batch_size per replica (batch_scope
// per_replica), whatever scope it was written in.
ExperimentConfig with_replica_batch(ExperimentConfig config);

struct RankPlacement {
  int64_t rank = 0;
  int64_t node_index = 0;  // into config.nodes
  std::string node;
  int64_t local_rank = 0;  // among the node's ranks
  int64_t stage = 0;
  int64_t replica = 0;
};
RankPlacement place_rank(const ExperimentConfig& config, int64_t rank);
// Every rank of the run, by rank.
std::vector<RankPlacement> rank_placements(const ExperimentConfig& config);
// The global ranks that run on config.nodes[node_index], ascending.
std::vector<int64_t> ranks_of_node(const ExperimentConfig& config, int64_t node_index);

}  // namespace flotilla
