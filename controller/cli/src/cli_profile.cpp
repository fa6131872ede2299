#include "cli_profile.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_console.h"
#include "cli_plan.h"
#include "exit_status.h"
#include "flotilla/controller/node_profiles.h"

namespace flotilla::controller {
namespace {

int show(const Store& store, const std::string& node) {
  const auto profiles = node_profiles(store, node);
  if (profiles.empty()) {
    std::cerr << "flotilla: no block profile of node " << node
              << " stored; `flotilla nodes profile " << node << " RUN.yaml` measures one\n";
    return kExitFailed;
  }
  for (const auto& p : profiles) std::cout << node_profile_line(p) << "\n";
  return kExitDone;
}

// What the run's ranks push through a block at once, as its plan says.
std::optional<int64_t> micro_batch_of(const Store& store, const ExperimentConfig& config) {
  const auto plan = engine_plan(store, config, /*measure=*/false, /*predict=*/false);
  if (plan.status != kExitDone) return std::nullopt;
  const auto doc = nlohmann::json::parse(plan.json, nullptr, false);
  if (doc.is_discarded() || !doc.contains("micro_batch_sizes") ||
      !doc["micro_batch_sizes"].is_array() || doc["micro_batch_sizes"].empty() ||
      !doc["micro_batch_sizes"][0].is_number_integer()) {
    std::cerr << "flotilla: flotilla-train --plan gave no micro-batch size\n";
    return std::nullopt;
  }
  return doc["micro_batch_sizes"][0].get<int64_t>();
}

}  // namespace

ExperimentConfig profile_config(ExperimentConfig config, const std::string& node,
                                int64_t micro_batch) {
  config.name = "block profile of " + config.name + " on " + node;
  config.nodes = {node};
  config.strategy = Strategy::ddp;
  config.batch_size = micro_batch;
  config.batch_scope = BatchScope::per_replica;
  config.chunks = 1;
  config.balance.clear();
  config.elastic = {};
  config.compression = {};
  config.save = {};
  config.slurm = {};
  config.max_steps = 1;
  return config;
}

void add_profile_command(CLI::App& nodes, ProfileCommand& c) {
  c.app = nodes.add_subcommand(
      "profile", "time a run's blocks on a node, kept for predicting runs there (docs/predict.md)");
  c.app->add_option("node", c.node, "the node")->required();
  c.app->add_option("file", c.file, "the run (experiment file) whose blocks to time");
  c.app->add_flag("--show", c.show, "list the node's stored profiles, run nothing");
}

bool profile_command_given(const ProfileCommand& c) {
  return c.app && *c.app;
}

int run_profile_command(Store& store, const ProfileCommand& c, const ControllerOptions& options) {
  const auto node = store.node(c.node);
  if (!node) {
    std::cerr << "flotilla: no node \"" << c.node << "\" (`flotilla nodes list` shows them)\n";
    return kExitBadInput;
  }
  if (node->kind == NodeKind::slurm) {
    std::cerr << "flotilla: node " << c.node
              << " is a SLURM cluster's login node, whose own cores are not the jobs': a block "
                 "profile of it would time the wrong machine\n";
    return kExitBadInput;
  }
  if (c.show) return show(store, c.node);
  if (c.file.empty()) {
    std::cerr << "flotilla: nodes profile: name the experiment file whose blocks to time\n";
    return kExitBadInput;
  }
  ExperimentConfig config;
  try {
    config = load_experiment(c.file);
  } catch (const ConfigError& e) {
    print_config_error(c.file, e);
    return kExitBadInput;
  }
  const auto micro_batch = micro_batch_of(store, config);
  if (!micro_batch) return kExitBadInput;  // the engine said why

  ConsoleController console(store, options);
  auto& controller = console.controller;
  std::string run;
  try {
    run = controller.start_block_profile(profile_config(config, c.node, *micro_batch));
  } catch (const ConfigError& e) {
    std::cerr << "flotilla: nodes profile cannot run:\n";
    for (const auto& p : e.problems()) std::cerr << "  " << p << "\n";
    return kExitBadInput;
  }
  std::cout << "run " << run << ": timing " << config.name << "'s blocks at micro-batch "
            << *micro_batch << " on " << c.node << std::endl;
  while (!controller.wait_for_end(run, std::chrono::seconds(1))) {
  }
  const auto row = store.run(run);
  if (row->state != RunState::finished) return exit_status_of(row->state);
  for (const auto& p : node_profiles(store, c.node))
    if (p.run_id == run) {
      if (p.record_json.empty()) break;
      std::cout << node_profile_line(p) << "\n(kept: `flotilla plan " << c.file << " --predict` on "
                << c.node << " takes its blocks' times from it)\n";
      return kExitDone;
    }
  std::cerr << "flotilla: run " << run
            << " finished without a profile record: is the node's flotilla-train older than "
               "--profile-blocks?\n";
  return kExitFailed;
}

}  // namespace flotilla::controller
