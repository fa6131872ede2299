#pragma once
// A plan's step predicted from what this machine measures of its blocks and
// what `flotilla nodes bench` measured of the links (issue 27): the inputs
// step_prediction.h composes, gathered from the model the plan built.

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/engine/plan.h"
#include "flotilla/protocol/experiment_config.h"
#include "plan/run_plan.h"
#include "plan/step_prediction.h"
#include "torch_adapter.h"

namespace flotilla {

// The link measurements a prediction uses: `flotilla nodes bench`'s busbw per
// message size over the run's nodes, as the controller hands them over
// (docs/predict.md: the --links file).
struct LinkMeasurements {
  std::string source;  // what they came from, said beside the prediction
  int64_t ranks = 0;   // the bench's ranks
  predict::AllReduceModel allreduce;
  // The all-reduce sweep again with every rank computing beside it (CPU; may
  // be empty): DDP's buckets where the backward keeps every core busy.
  predict::AllReduceModel allreduce_computing;
  // The all-reduce beside compute when the bench has that sweep, else the idle one.
  const predict::AllReduceModel& allreduce_beside_compute() const;
  // A point-to-point transfer of `bytes`: the bench's send/receive time at
  // that size (interpolated in log size between measured sizes, held beyond
  // them) when it has one; else from the all-reduce sweep, whose small
  // message takes 2(P-1) hops, one latency each, and a large one moves at
  // the links' bandwidth, busbw.
  predict::LinkModel link_for(double bytes) const;
  // A pipeline's crossing of `bytes`: on CPU its stages compute while their
  // activations cross, so the bench's send/receive with every rank computing
  // beside it when it has one; else link_for.
  predict::LinkModel crossing_for(double bytes) const;
  double smallest_time_ms = 0;
  std::vector<std::pair<double, double>> p2p_ms_at_bytes;            // by size
  std::vector<std::pair<double, double>> p2p_computing_ms_at_bytes;  // by size
  // The machine each node's ranks ran on (its boot id) and their cores, as
  // the bench's ranks said: nodes of one machine share its cores.
  struct NodeMachine {
    std::string machine;
    int64_t cores = 0;
  };
  std::map<std::string, NodeMachine> nodes;
};

// Parses the --links file's JSON; throws ConfigError naming the field that
// is missing or not what it should be.
LinkMeasurements parse_link_measurements(const std::string& json_text, const std::string& origin);

// Measures the blocks (forward, backward at the micro-batch), the
// optimizer's step and the codec's round trip on `model` and `samples` as a
// rank would run them, and replays the plan's step on them and `links`.
// With options.profile_dir, the block and optimizer times come from this
// machine's profile of the same blocks when one is kept (block_profile.h),
// and a new one is kept when they are timed. `loaded`: this process's memory
// once it had loaded the data and built the model, as a rank's is at its
// start (the base of each rank's predicted peak).
PredictionPlan predict_run_plan(const RunPlan& plan, const ExperimentConfig& config,
                                torch::nn::Sequential& model, const torch::Tensor& samples,
                                const std::optional<LinkMeasurements>& links,
                                const PlanOptions& options, const MemoryStats& loaded);

}  // namespace flotilla
