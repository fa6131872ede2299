#pragma once
// The numbers of a run before it starts, for the window's plan preview and
// for anyone deciding a layout: the model's blocks and parameters, how they
// are cut into pipeline stages, which rank is which stage of which replica
// on which node, the bytes a step all-reduces and sends across each pipeline
// boundary. Computed by the engine's own functions on the model it would
// build; docs/plan.md describes every field. Free of LibTorch headers.

#include <functional>
#include <string>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

struct PlanOptions {
  // Without a balance in the config, measure it as the engine's rank 0 does
  // at start (random initialisation, the data set's first evaluation batch,
  // forward and backward of every block); otherwise it is estimated.
  bool measure = false;
  // Predict the step (docs/predict.md): time every block, the optimizer and
  // the codec here, as a rank would, and replay the step on them and on
  // `links_json` (the --links file: `flotilla nodes bench`'s busbw over the
  // run's nodes; empty: communication is not counted and the plan says so).
  // Implies measure.
  bool predict = false;
  std::string links_json;
  std::string links_origin = "--links";  // named in errors
  // Where predictions keep this machine's block profiles (block_profile.h)
  // and reuse them; empty: the blocks are timed every time. remeasure: time
  // them again and replace the profile.
  std::string profile_dir;
  bool remeasure = false;
  // Profiles measured on a node (`flotilla nodes profile`, the `profile`
  // records of docs/records.md), one JSON file each in node_profiles_dir:
  // when one of node_profiles_node matches this config at its micro-batch
  // and the threads a rank gets there, its times are used instead of timing
  // the blocks here. Empty: this machine's.
  std::string node_profiles_dir, node_profiles_node;
  // Called with the `profile` record's body (its fields but type and rank)
  // once the blocks are timed or found: `flotilla-train --profile-blocks`.
  std::function<void(const std::string&)> on_profile;
  // The flotilla-train that times how ranks sharing a machine's cores slow
  // each other, by running one-rank trainings at once (process_sharing.h);
  // flotilla-train --plan sets itself. Empty: timed in threads of this
  // process instead, which shows less of it (core_sharing.h).
  std::string engine_binary;
};

// Where a prediction keeps this machine's block profiles: $FLOTILLA_PROFILE_DIR,
// else $XDG_CACHE_HOME/flotilla/profiles, else ~/.cache/flotilla/profiles.
std::string default_profile_dir();

// The plan as one JSON document. Throws ConfigError for what the engine
// refuses (a model that cannot take the data, --measure on a missing GPU or
// data set), std::runtime_error for other failures.
std::string plan_json(const ExperimentConfig& config, const PlanOptions& options = {});

}  // namespace flotilla
