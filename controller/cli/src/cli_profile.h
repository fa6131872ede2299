#pragma once
// `flotilla nodes profile NODE RUN.yaml`: the run's blocks timed on NODE
// (node_profiles.h), kept for the predictions of runs there.

#include <CLI/CLI.hpp>

#include <string>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct ProfileCommand {
  CLI::App* app = nullptr;
  std::string node;
  std::string file;   // the run whose blocks to time; empty with --show
  bool show = false;  // list the node's stored profiles, run nothing
};

// Registers `profile` under the `nodes` command.
void add_profile_command(CLI::App& nodes, ProfileCommand& command);
bool profile_command_given(const ProfileCommand& command);
int run_profile_command(Store& store, const ProfileCommand& command,
                        const ControllerOptions& options);

// The config a node times for `config`'s blocks: one node, `config`'s ranks
// on it (so that a rank's threads are the run's), data-parallel at
// `micro_batch` (what the run's ranks push through a block at once) with
// nothing that cannot change a block's time.
ExperimentConfig profile_config(ExperimentConfig config, const std::string& node,
                                int64_t micro_batch);

}  // namespace flotilla::controller
