#pragma once
// `flotilla plot RUN... --panel P -o FILE`: one dashboard panel as PNG or SVG,
// drawn by the sibling `flotilla-gui --render` (the controller links no
// charts and no widgets: DESIGN.md).

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct PlotCommand {
  CLI::App* command = nullptr;
  std::vector<std::string> runs;
  std::string panel = "throughput";
  std::string x = "step";
  std::string smoothing = "0";
  std::string size = "1000x560";
  std::string output;
};

void add_plot_command(CLI::App& app, PlotCommand& plot);

// The exit status of `plot` when it was given: flotilla-gui's own (0, or 2
// with its message for bad input), 2 for a run not in the store.
std::optional<int> run_plot_command(Store& store, const PlotCommand& plot);

}  // namespace flotilla::controller
