#include "cli_bench.h"

#include <iostream>
#include <mutex>

#include "exit_status.h"
#include "flotilla/controller/link_bench.h"

namespace flotilla::controller {
namespace {

// States and problems of the sweep run, as they happen.
class BenchObserver final : public ControllerObserver {
 public:
  void state_changed(const std::string& run, RunState state, const std::string& reason) override {
    std::lock_guard lock(mutex_);
    std::cout << run << "  " << name_of(state) << (reason.empty() ? "" : ": " + reason)
              << std::endl;
  }
  void problem(const std::string& message) override {
    std::lock_guard lock(mutex_);
    std::cerr << "flotilla: " << message << std::endl;
  }

 private:
  std::mutex mutex_;
};

std::vector<std::string> nodes_to_bench(const Store& store, const BenchCommand& c) {
  if (!c.nodes.empty()) return c.nodes;
  std::vector<std::string> nodes;
  for (const auto& name : store.node_names())
    if (name != "local") nodes.push_back(name);
  return nodes;
}

int show(const Store& store, const std::vector<std::string>& nodes) {
  const auto bench = latest_link_bench(store, nodes);
  if (!bench) {
    std::cerr << "flotilla: no finished link sweep of " << node_set_key(nodes)
              << " stored; `flotilla nodes bench " << join_list(nodes) << "` measures one\n";
    return kExitFailed;
  }
  std::cout << link_bench_table(*bench);
  return kExitDone;
}

}  // namespace

void add_bench_command(CLI::App& nodes, BenchCommand& c) {
  c.app = nodes.add_subcommand(
      "bench", "measure the links: an all-reduce size sweep (as nccl-tests) over the nodes");
  c.app->add_option("names", c.nodes, "nodes (default: every node but local)");
  c.app->add_option("--ranks-per-node", c.ranks_per_node, "ranks on each node")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  c.app->add_option("--device", c.device, "cpu (Gloo) or cuda (NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  c.app->add_option("--min-bytes", c.min_bytes, "smallest message (default: the engine's, 8 B)")
      ->check(CLI::PositiveNumber);
  c.app->add_option("--max-bytes", c.max_bytes, "largest message (default: the engine's, 256 MiB)")
      ->check(CLI::PositiveNumber);
  c.app->add_option("--iterations", c.iterations, "timed all-reduces per size")
      ->check(CLI::PositiveNumber);
  c.app->add_option("--warmup", c.warmup, "untimed all-reduces per size first")
      ->check(CLI::PositiveNumber);
  c.app->add_flag("--show", c.show, "print the newest stored sweep of these nodes, run nothing");
}

bool bench_command_given(const BenchCommand& c) {
  return c.app && *c.app;
}

int run_bench_command(Store& store, const BenchCommand& c, const ControllerOptions& options) {
  const auto nodes = nodes_to_bench(store, c);
  if (nodes.empty()) {
    std::cerr << "flotilla: no nodes to bench: name them, or add some (`flotilla nodes add`); "
                 "`flotilla nodes bench local --ranks-per-node 2` measures this machine alone\n";
    return kExitBadInput;
  }
  if (c.show) return show(store, nodes);
  if (c.min_bytes > 0 && c.max_bytes > 0 && c.min_bytes > c.max_bytes) {
    std::cerr << "flotilla: --min-bytes " << c.min_bytes << " is above --max-bytes " << c.max_bytes
              << "\n";
    return kExitBadInput;
  }
  BenchObserver observer;
  Controller controller(store, options);
  controller.set_observer(&observer);
  Controller::LinkBenchRequest request;
  request.nodes = nodes;
  request.ranks_per_node = c.ranks_per_node;
  request.device = c.device == "cuda" ? DeviceKind::cuda : DeviceKind::cpu;
  request.sweep = {c.min_bytes, c.max_bytes, c.iterations, c.warmup};
  std::string run;
  try {
    run = controller.start_link_bench(request);
  } catch (const ConfigError& e) {
    std::cerr << "flotilla: nodes bench cannot run:\n";
    for (const auto& p : e.problems()) std::cerr << "  " << p << "\n";
    return kExitBadInput;
  }
  std::cout << "run " << run << ": all-reduce sweep over " << join_list(nodes) << ", "
            << c.ranks_per_node << " rank(s) per node\n(Ctrl-C leaves it running: `flotilla attach "
            << run << "` follows it, `flotilla nodes bench --show " << join_list(nodes)
            << "` prints it)" << std::endl;
  while (!controller.wait_for_end(run, std::chrono::seconds(1))) {
  }
  const auto row = store.run(run);
  if (row->state != RunState::finished) return exit_status_of(row->state);
  const auto points = link_bench_points(store, run);
  if (points.empty()) {
    std::cerr << "flotilla: run " << run
              << " finished without bench records: is the nodes' flotilla-train older than "
                 "--allreduce-bench?\n";
    return kExitFailed;
  }
  LinkBench bench;
  bench.points = points;
  bench.p2p = link_bench_points(store, run, "sendrecv");
  bench.p2p_computing = link_bench_points(store, run, "sendrecv_computing");
  bench.allreduce_computing = link_bench_points(store, run, "allreduce_computing");
  for (const auto& b : link_benches(store, node_set_key(nodes)))
    if (b.run_id == run) bench.row = b;
  std::cout << link_bench_table(bench);
  return kExitDone;
}

}  // namespace flotilla::controller
