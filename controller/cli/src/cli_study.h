#pragma once
// `flotilla study list`, `flotilla study run NAME [--scale cpu|gpu]
// [--nodes ...] -o DIR`, `flotilla study report SWEEP -o DIR`: the seed
// studies (flotilla/controller/study.h) run as sweeps and written up.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct StudyCommands {
  CLI::App* study = nullptr;
  CLI::App* list = nullptr;
  CLI::App* run = nullptr;
  CLI::App* report = nullptr;
  std::string name, scale = "cpu", nodes, sweep_name, output;
  std::string report_sweep;
  bool dry_run = false, yes = false, predict = false;
};

void add_study_commands(CLI::App& app, StudyCommands& commands);

// The exit status of the study command that was given, or nothing if none was.
std::optional<int> run_study_commands(Store& store, const StudyCommands& commands,
                                      const ControllerOptions& options);

}  // namespace flotilla::controller
