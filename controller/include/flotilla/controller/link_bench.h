#pragma once
// The link roofline: `flotilla nodes bench` runs the engine's all-reduce size
// sweep (`flotilla-train --allreduce-bench`, nccl-tests' algbw and busbw per
// message size) as a run of its own over a set of nodes. The sweep's numbers
// are that run's `bench` records; the link_benches table (migration 0006)
// says which runs are sweeps and over which nodes, so that the compare
// table finds the sweep of a training run's nodes.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct LinkBenchRow {
  std::string run_id;
  std::string node_set;  // node_set_key() of the nodes
  int64_t ranks_per_node = 1;
  std::string device = "cpu";
  int64_t created_ms = 0;
  RunState state = RunState::created;  // the sweep run's state
};

// One message size of the sweep, from the lowest rank's bench record.
struct LinkBenchPoint {
  int64_t bytes = 0;
  int64_t ranks = 0;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

// The machine a node's ranks ran on, from the sweep's `start` records: its
// boot id (nodes that share one are containers or namespaces of one
// machine, whose ranks share its cores) and the cores a rank could use.
struct NodeMachine {
  std::string machine;
  int64_t cores = 0;
};

struct LinkBench {
  LinkBenchRow row;
  std::vector<LinkBenchPoint> points;  // by size
  std::vector<LinkBenchPoint> p2p;     // send/receive between two ranks, by size; may be none
  std::vector<LinkBenchPoint> p2p_computing;  // the same with every rank computing beside it (CPU)
  // The all-reduce's sizes again with every rank computing beside it (CPU).
  std::vector<LinkBenchPoint> allreduce_computing;
  std::map<std::string, NodeMachine> nodes;  // by node; empty for sweeps before machine ids
};

// The node names sorted and comma-joined: one key for a set of nodes.
std::string node_set_key(std::vector<std::string> nodes);

void add_link_bench(Store& store, const LinkBenchRow& row);
// Every sweep, or those over `node_set`, newest first.
std::vector<LinkBenchRow> link_benches(const Store& store,
                                       const std::optional<std::string>& node_set = {});
// The sweep's sizes, read from the run's `bench` records of `op`: the
// all-reduce's, "sendrecv" (one way between two ranks), or either with
// "_computing" (every rank computing beside it, CPU); sweeps older than an
// op have none of it.
std::vector<LinkBenchPoint> link_bench_points(const Store& store, const std::string& run,
                                              const std::string& op = "allreduce");
// Each node's machine, from the run's `start` records (nodes whose ranks
// said none are left out).
std::map<std::string, NodeMachine> link_bench_machines(const Store& store, const std::string& run);
// The newest finished sweep over exactly `nodes` that has points, preferring
// one with `ranks` ranks in all (a training run's world size) when one exists.
std::optional<LinkBench> latest_link_bench(const Store& store,
                                           const std::vector<std::string>& nodes,
                                           std::optional<int64_t> ranks = std::nullopt);

// The sweep as flotilla-train --plan --predict's --links file
// (docs/predict.md): its source in words, its ranks, when it was measured,
// each size's time and busbw, and each node's machine and cores.
std::string link_measurements_json(const LinkBench& bench);

// The sweep as an aligned table for the console: size, time, algbw, busbw.
std::string link_bench_table(const LinkBench& bench);
// "8 B", "64 KiB", "256 MiB".
std::string byte_size_text(double bytes);

}  // namespace flotilla::controller
