#pragma once
// What the cluster tests share: a controller database with the test
// cluster's hosts as nodes, driven through the real `flotilla` CLI (its own
// known_hosts, every command a child process with a time limit), a DDP
// experiment over the three hosts, and the run id the CLI prints.
#include <signal.h>

#include <gtest/gtest.h>

#include <QString>
#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/controller/store.h"
#include "processes.h"
#include "temp_dir.h"
#include "test_cluster.h"

namespace flotilla::testing {

#define SKIP_WITHOUT_CLUSTER()                              \
  do {                                                      \
    std::string why;                                        \
    if (!TestCluster::available(&why)) GTEST_SKIP() << why; \
  } while (false)

// A controller database with the cluster's hosts as nodes, driven through the CLI.
class ClusterControl {
 public:
  // With `add_hosts` false, the database starts without nodes.
  explicit ClusterControl(const TestCluster& cluster, bool add_hosts = true) : cluster_(cluster) {
    if (!add_hosts) return;
    for (const auto& h : cluster.hosts()) {
      const auto [status, out] =
          flotilla({"nodes", "add", h.name, "--host", h.address, "--user", h.user, "--key",
                    cluster.key_file().string(), "--remote-dir", h.remote_dir});
      EXPECT_EQ(status, 0) << out;
    }
  }
  ~ClusterControl() {
    // Nothing of a test outlives it on this machine: the CLI and what it started.
    for (pid_t pid : live_processes_with({db_})) ::kill(pid, SIGKILL);
  }
  std::vector<std::string> base() const {
    return {FLOTILLA_CLI_BINARY, "--db", db_, "--known-hosts", known_hosts()};
  }
  std::pair<int, std::string> flotilla(
      const std::vector<std::string>& args,
      std::chrono::seconds limit = std::chrono::seconds(300)) const {
    auto argv = base();
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess child(argv, dir_.path() / ("out-" + std::to_string(++calls_) + ".txt"));
    const auto status = child.wait(limit);
    EXPECT_TRUE(status) << args.front() << " still running after " << limit.count() << " s";
    return {status.value_or(-1), child.output()};
  }
  std::unique_ptr<ChildProcess> start(const std::vector<std::string>& args,
                                      const std::string& output) const {
    auto argv = base();
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<ChildProcess>(argv, dir_.path() / output);
  }
  std::string known_hosts() const { return (dir_.path() / "known_hosts").string(); }
  controller::Store store() const { return controller::Store(QString::fromStdString(db_)); }
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    return dir_.write(name, text);
  }
  // The one run, once every node has stored at least `records` records of it.
  std::string wait_for_records(size_t records, std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::filesystem::exists(db_)) {
        auto s = store();
        const auto runs = s.runs();
        if (!runs.empty()) {
          std::map<std::string, size_t> per_node;
          for (const auto& r : s.records(runs.front().id)) ++per_node[r.node];
          bool all = per_node.size() == cluster_.hosts().size();
          for (const auto& [node, n] : per_node) all = all && n >= records;
          if (all) return runs.front().id;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "no run with " << records << " records on every node within " << limit.count()
                  << " s";
    return {};
  }

 private:
  const TestCluster& cluster_;
  TempDir dir_;
  std::string db_ = (dir_.path() / "flotilla.db").string();
  mutable int calls_ = 0;
};

inline std::string ddp_experiment(const std::string& name, int steps) {
  return "name: " + name +
         "\nmodel: small_cnn\ndataset: fashion_mnist\nstrategy: ddp\n"
         "nodes: [flh1, flh2, flh3]\nranks_per_node: 1\nbatch_size: 64\nepochs: 1\n"
         "max_steps: " +
         std::to_string(steps) + "\nthreads: 1\n";
}

inline std::string run_id_in(const std::string& output) {
  std::smatch id;
  if (!std::regex_search(output, id, std::regex("run ([0-9]{8}-[0-9]{6}-[0-9a-f]{4}):"))) return {};
  return id[1];
}

}  // namespace flotilla::testing
