#pragma once
// `flotilla sweep FILE [--dry-run] [--yes] [--nodes ...] [--name ...]`,
// `flotilla sweep show NAME [--format ...]`, `flotilla sweep kill NAME`,
// `flotilla sweeps`.

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>

#include "cli_console.h"
#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"
#include "flotilla/controller/sweep_plan.h"
#include "flotilla/protocol/sweep.h"

namespace flotilla::controller {

struct SweepCommands {
  CLI::App* sweep = nullptr;
  CLI::App* show = nullptr;
  CLI::App* kill = nullptr;
  CLI::App* list = nullptr;
  std::string file, nodes, name;
  bool dry_run = false, yes = false, predict = false;
  std::string show_name, format = "table";
  std::string kill_name;
  double grace_s = 5.0;
};

// Registers the sweep commands on `app`, filling `commands` when parsed.
void add_sweep_commands(CLI::App& app, SweepCommands& commands);

// How a sweep is started: `source` names it in errors and in the database
// (its file), `nodes` replaces the base's nodes (comma-separated).
struct SweepLaunch {
  std::string source;
  std::string nodes;
  bool dry_run = false;
  bool yes = false;
  bool predict = false;  // each point's step predicted first, kept with its run
};
// Resolves its base, checks the grid and the nodes, prints the grid and the
// refusals, then (unless a dry run) stores the sweep and runs it to its end,
// printing its table. The exit status (docs/sweeps.md).
int launch_sweep(Store& store, SweepSpec spec, const SweepLaunch& launch,
                 const ControllerOptions& options);

// The exit status of the sweep command that was given, or nothing if none was.
std::optional<int> run_sweep_commands(Store& store, const SweepCommands& commands,
                                      const ControllerOptions& options);

// `flotilla attach` without run ids: takes over every live sweep that no live
// controller runs (and says which others run), calls `follow` (following the
// live runs) while they go on, then waits for them. Returns `follow`'s status,
// or the sweeps' when that is worse; whether any sweep was taken goes to `any`.
int with_live_sweeps(Store& store, ConsoleController& console, const std::function<int()>& follow,
                     bool* any = nullptr);

}  // namespace flotilla::controller
