#pragma once
// `flotilla compare` and `flotilla report`.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct CompareCommands {
  CLI::App* compare = nullptr;
  CLI::App* report = nullptr;
  std::vector<std::string> runs;
  std::string experiment;
  std::string baseline;
  std::string format = "table";
  std::string columns;  // comma-separated keys
  std::string output;   // report: the directory
  std::string panels = "throughput,step_time,memory,bandwidth";
  std::string size = "1000x500";
};

// Registers both commands on `app`, filling `commands` when parsed.
void add_compare_commands(CLI::App& app, CompareCommands& commands);

// The exit status of the command that was given, or nothing if neither was.
std::optional<int> run_compare_commands(Store& store, const CompareCommands& commands);

}  // namespace flotilla::controller
