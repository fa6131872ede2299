#pragma once
// `flotilla nodes bench [NODE...]`: the link roofline (link_bench.h).

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct BenchCommand {
  CLI::App* app = nullptr;
  std::vector<std::string> nodes;
  int64_t ranks_per_node = 1;
  std::string device = "cpu";
  int64_t min_bytes = 0, max_bytes = 0, iterations = 0, warmup = 0;
  bool show = false;  // print the stored sweep, run nothing
};

// Registers `bench` under the `nodes` command.
void add_bench_command(CLI::App& nodes, BenchCommand& command);
bool bench_command_given(const BenchCommand& command);
int run_bench_command(Store& store, const BenchCommand& command, const ControllerOptions& options);

}  // namespace flotilla::controller
