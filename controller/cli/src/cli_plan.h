#pragma once
// `flotilla plan FILE [--measure] [--predict] [--json]`: what the engine will
// do with an experiment, computed by the sibling `flotilla-train --plan`
// (the controller links no Torch); with --predict its step predicted on this
// machine's block times and the newest link bench stored for the
// experiment's nodes (docs/predict.md).

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "flotilla/controller/store.h"
#include "flotilla/protocol/experiment_config.h"

namespace flotilla::controller {

struct PlanCommand {
  CLI::App* command = nullptr;
  std::string file;
  std::string nodes;  // replaces the file's nodes, as `run --nodes` does
  bool measure = false;
  bool predict = false;
  bool remeasure = false;  // time the blocks again, not this machine's profile of them
  bool json = false;
};

void add_plan_command(CLI::App& app, PlanCommand& plan);

// flotilla-train --plan on `config` (with --predict: on the newest link bench
// of its nodes, said on stderr when there is none): its JSON, or the exit
// status to end with once its error is printed.
struct EnginePlan {
  int status = 0;  // 0: `json` holds the plan
  std::string json;
};
EnginePlan engine_plan(const Store& store, const ExperimentConfig& config, bool measure,
                       bool predict, bool remeasure = false);
// "predicted step 25.6 ms = 1250.0 samples/s (links: ...)"; "" without a prediction.
std::string prediction_line(const std::string& plan_json);

// The exit status of `plan` when it was given: 0, 2 for an experiment the
// engine refuses (its words printed), 1 when flotilla-train fails otherwise.
std::optional<int> run_plan_command(Store& store, const PlanCommand& plan);

}  // namespace flotilla::controller
