#pragma once
// `flotilla nodes add|list|remove|probe|bench|profile`.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli_bench.h"
#include "cli_profile.h"
#include "flotilla/controller/connect_options.h"
#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct NodeCommands {
  CLI::App* add = nullptr;
  CLI::App* list = nullptr;
  CLI::App* remove = nullptr;
  CLI::App* probe = nullptr;
  NodeRow new_node;
  bool add_slurm = false;  // --slurm
  std::string remove_name;
  std::vector<std::string> probe_names;
  BenchCommand bench;
  ProfileCommand profile;
};

// Registers the `nodes` subcommands on `app`, filling `commands` when parsed.
void add_node_commands(CLI::App& app, NodeCommands& commands);

// The exit status of the node command that was given, or nothing if none was.
std::optional<int> run_node_commands(Store& store, const NodeCommands& commands,
                                     const ConnectOptions& connect);

}  // namespace flotilla::controller
