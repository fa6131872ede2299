// A path that drops every packet without a reset (cluster.sh drop: a switch
// gone silent, not a link down) between the controller and one node of a
// 2-node DDP run, for 60 s and for good. The figures (time to notice, time
// to reconnect, records in the store and in the spools) are printed.
//
// The 60 s outage silences only the controller's path to the node: its
// ranks' own traffic flows, so the run can go on, as the issue asks. When
// the whole node goes silent mid-run, its ranks' Gloo sockets may time out
// within the minute (seen: "pair.cc Read error … Connection timed out" after
// about 20 s) and the run then fails, which the permanent case covers.
//
// A frozen host is the other silence: every process of the run on one node
// stopped (SIGSTOP), its sshd and kernel still answering, so its link stays
// up and nothing on the node runs to notice. The controller's stall
// watchdog ends the run.
#include <signal.h>

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "cluster_control.h"
#include "flotilla/controller/store.h"
#include "processes.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using controller::RunState;
using controller::Store;
using nlohmann::json;

// What issue 15 asks of a silent link.
constexpr auto kNoticedWithin = 20s;
constexpr auto kReconnectedWithin = 10s;

std::string two_node_experiment(const std::string& name, int steps, const std::string& extra = {}) {
  return "name: " + name +
         "\nmodel: small_cnn\ndataset: fashion_mnist\nstrategy: ddp\n"
         "nodes: [flh1, flh2]\nranks_per_node: 1\nbatch_size: 64\nepochs: 1\nthreads: 1\n"
         "max_steps: " +
         std::to_string(steps) + "\n" + extra;
}

// Seconds from `since` until `text` shows in the child's output, or nothing
// if it has not within `limit`.
std::optional<double> seconds_until_said(const ChildProcess& child, const std::string& text,
                                         Clock::time_point since, std::chrono::seconds limit) {
  while (Clock::now() < since + limit) {
    if (child.output().find(text) != std::string::npos)
      return std::chrono::duration<double>(Clock::now() - since).count();
    std::this_thread::sleep_for(100ms);
  }
  return std::nullopt;
}

std::vector<std::string> run_processes(const TestCluster& cluster, const std::string& host) {
  std::vector<std::string> found;
  for (const auto& [pid, cmdline] : cluster.processes_on(host))
    if (cmdline.find("flotilla-train") != std::string::npos ||
        cmdline.find("supervise") != std::string::npos)
      found.push_back(std::to_string(pid) + " " + cmdline);
  return found;
}

// Seconds until no process of the run is left on `host`, or nothing after `limit`.
std::optional<double> seconds_until_nothing_left(const TestCluster& cluster,
                                                 const std::string& host,
                                                 std::chrono::seconds limit) {
  const auto began = Clock::now();
  while (Clock::now() < began + limit) {
    if (run_processes(cluster, host).empty())
      return std::chrono::duration<double>(Clock::now() - began).count();
    std::this_thread::sleep_for(200ms);
  }
  return std::nullopt;
}

// The stored records of `node`: seq 1..N each once.
std::vector<controller::RecordRow> contiguous_records_of(const Store& store, const std::string& run,
                                                         const std::string& node) {
  std::vector<controller::RecordRow> records;
  for (auto& r : store.records(run))
    if (r.node == node) records.push_back(r);
  for (size_t i = 0; i < records.size(); ++i)
    EXPECT_EQ(records[i].seq, static_cast<int64_t>(i + 1))
        << node << ": seq gap or repeat at " << i;
  return records;
}

size_t lines_in(const std::filesystem::path& file) {
  std::ifstream in(file);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) lines += !line.empty();
  return lines;
}

TEST(ClusterSilentLink, ASixtySecondOutageIsNoticedReconnectedAndLosesNoRecord) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  ClusterControl control(cluster);
  // More steps than the outage lasts, on any machine: the run is killed once
  // the node is back and its records flow again.
  const auto file =
      control.write("silent.yaml", two_node_experiment("silent-60s", 100000, "epochs: 1000\n"));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();

  cluster.drop("flh2", true, TestCluster::kControllerAddress);
  const auto dropped = Clock::now();
  const auto noticed = seconds_until_said(*runner, "node flh2 is unreachable", dropped, 60s);
  ASSERT_TRUE(noticed) << runner->output();
  std::cout << "silent loss noticed after " << *noticed << " s (limit " << kNoticedWithin.count()
            << " s)" << std::endl;
  EXPECT_LT(*noticed, static_cast<double>(kNoticedWithin.count())) << runner->output();

  // The outage lasts 60 s in all; the run goes on on both nodes meanwhile.
  std::this_thread::sleep_until(dropped + 60s);
  EXPECT_FALSE(runner->wait(0ms)) << runner->output();
  for (const auto* host : {"flh1", "flh2"})
    EXPECT_FALSE(run_processes(cluster, host).empty()) << host << " stopped during the outage";
  EXPECT_FALSE(controller::is_terminal(control.store().run(run)->state));

  cluster.drop("flh2", false);
  const auto restored = Clock::now();
  const auto back = seconds_until_said(*runner, "node flh2: reconnected", restored, 60s);
  ASSERT_TRUE(back) << runner->output();
  std::cout << "link reconnected " << *back << " s after the path came back (limit "
            << kReconnectedWithin.count() << " s)" << std::endl;
  EXPECT_LT(*back, static_cast<double>(kReconnectedWithin.count())) << runner->output();

  // Records written on flh2 during the outage and after it reach the store.
  const auto stored_on = [&](const std::string& node) {
    size_t n = 0;
    for (const auto& r : control.store().records(run)) n += r.node == node;
    return n;
  };
  const auto stored_at_return = stored_on("flh2");
  const auto flowing_by = Clock::now() + 60s;
  while (stored_on("flh2") <= stored_at_return + 20 && Clock::now() < flowing_by)
    std::this_thread::sleep_for(200ms);
  ASSERT_GT(stored_on("flh2"), stored_at_return + 20) << runner->output();
  const auto [kill_status, kill_output] = control.flotilla({"kill", run});
  EXPECT_EQ(kill_status, 0) << kill_output;
  ASSERT_TRUE(runner->wait(120s)) << runner->output();
  const auto store = control.store();
  EXPECT_EQ(store.run(run)->state, RunState::killed) << runner->output();
  for (const auto& h : cluster.hosts()) {
    const auto records = contiguous_records_of(store, run, h.name);
    ASSERT_FALSE(records.empty()) << h.name;
    EXPECT_EQ(records.back().type, "run_end") << h.name;
    // Everything its agent spooled is stored: nothing lost, nothing twice.
    const auto spooled = lines_in(h.remote_dir + "/home/runs/" + run + "/spool.jsonl");
    EXPECT_EQ(records.size(), spooled) << h.name;
    std::map<int64_t, std::set<int64_t>> steps_by_rank;
    for (const auto& r : records)
      if (r.type == "step") {
        const auto step = json::parse(r.body)["step"].get<int64_t>();
        EXPECT_TRUE(steps_by_rank[r.rank].insert(step).second)
            << h.name << " rank " << r.rank << " step " << step << " stored twice";
      }
    ASSERT_EQ(steps_by_rank.size(), 1u) << h.name;
    // Steps 1..last, none missing.
    const auto& steps = steps_by_rank.begin()->second;
    EXPECT_EQ(static_cast<int64_t>(steps.size()), *steps.rbegin()) << h.name;
    std::cout << h.name << ": " << records.size() << " records stored, " << spooled << " spooled, "
              << steps.size() << " steps" << std::endl;
  }
  for (const auto& h : cluster.hosts())
    EXPECT_EQ(run_processes(cluster, h.name), std::vector<std::string>{}) << h.name;
}

// For good: the node is reported unreachable, the reachable node's ranks
// stall in their collective and its stall watchdog ends them, and the run
// ends failed naming the unreachable node (a stop cannot reach it; its own
// watchdog stops its ranks, and what it recorded since stays in its spool).
TEST(ClusterSilentLink, APermanentOutageEndsTheRunNamingTheNodeAndLeavesNothingRunning) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  ClusterControl control(cluster);
  constexpr int kStallTimeoutS = 30;
  const auto file = control.write(
      "lost.yaml",
      two_node_experiment("silent-lost", 100000,
                          "stall_timeout_s: " + std::to_string(kStallTimeoutS) + "\n"));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();

  cluster.drop("flh2", true);
  const auto dropped = Clock::now();
  const auto noticed = seconds_until_said(*runner, "node flh2 is unreachable", dropped, 60s);
  ASSERT_TRUE(noticed) << runner->output();
  std::cout << "silent loss noticed after " << *noticed << " s (limit " << kNoticedWithin.count()
            << " s)" << std::endl;
  EXPECT_LT(*noticed, static_cast<double>(kNoticedWithin.count())) << runner->output();

  const auto ended = runner->wait(std::chrono::seconds(kStallTimeoutS + 120));
  ASSERT_TRUE(ended) << runner->output();
  const double run_ended_after = std::chrono::duration<double>(Clock::now() - dropped).count();
  EXPECT_EQ(*ended, 1) << runner->output();  // failed
  const auto store = control.store();
  const auto row = store.run(run);
  std::cout << "run ended " << run_ended_after
            << " s after the path went silent: " << name_of(row->state) << ": " << row->reason
            << std::endl;
  EXPECT_EQ(row->state, RunState::failed);
  EXPECT_NE(row->reason.find("node flh2: unreachable since"), std::string::npos) << row->reason;
  EXPECT_NE(row->reason.find("node flh1: stalled"), std::string::npos) << row->reason;
  EXPECT_NE(runner->output().find(row->reason), std::string::npos) << runner->output();

  const auto flh1_clear = seconds_until_nothing_left(cluster, "flh1", 10s);
  EXPECT_TRUE(flh1_clear) << "flh1 still runs " << run_processes(cluster, "flh1").front();
  // The unreachable node's own watchdog stops its ranks too.
  const auto flh2_clear = seconds_until_nothing_left(cluster, "flh2", 60s);
  EXPECT_TRUE(flh2_clear) << "flh2 still runs " << run_processes(cluster, "flh2").front();
  if (flh1_clear && flh2_clear)
    std::cout << "no process of the run left on flh1 " << *flh1_clear
              << " s after the run ended, on flh2 (unreachable) " << *flh2_clear << " s after that"
              << std::endl;

  const auto flh1 = contiguous_records_of(store, run, "flh1");
  ASSERT_FALSE(flh1.empty());
  EXPECT_EQ(flh1.back().type, "run_end");
  EXPECT_EQ(flh1.size(),
            lines_in(cluster.host("flh1").remote_dir + "/home/runs/" + run + "/spool.jsonl"));
  const auto flh2 = contiguous_records_of(store, run, "flh2");
  const auto flh2_spooled =
      lines_in(cluster.host("flh2").remote_dir + "/home/runs/" + run + "/spool.jsonl");
  std::cout << "flh1: " << flh1.size() << " records stored, all of its spool; flh2: " << flh2.size()
            << " stored, " << flh2_spooled
            << " in its spool (the rest wait there: its path never came back)" << std::endl;
  EXPECT_GE(flh2_spooled, flh2.size());
}

// The processes of the run on `host` and the agent that serves it: what a
// frozen host stops (its sshd and kernel go on).
std::vector<int> flotilla_processes(const TestCluster& cluster, const std::string& host) {
  std::vector<int> found;
  for (const auto& [pid, cmdline] : cluster.processes_on(host))
    if (cmdline.find("flotilla-agent") != std::string::npos ||
        cmdline.find("flotilla-train") != std::string::npos)
      found.push_back(pid);
  return found;
}

// Stops processes as a frozen host would, and lets them go on when it goes
// out of scope, also when the test fails or throws.
class Freeze {
 public:
  explicit Freeze(std::vector<int> pids) : pids_(std::move(pids)) {
    for (int pid : pids_) ::kill(pid, SIGSTOP);
  }
  ~Freeze() { thaw(); }
  Freeze(const Freeze&) = delete;
  Freeze& operator=(const Freeze&) = delete;
  void thaw() {
    for (int pid : pids_) ::kill(pid, SIGCONT);
    pids_.clear();
  }

 private:
  std::vector<int> pids_;
};

// The highest step stored for each rank of `node`.
std::map<int64_t, int64_t> last_steps(const Store& store, const std::string& run,
                                      const std::string& node) {
  std::map<int64_t, int64_t> last;
  for (const auto& r : store.records(run))
    if (r.node == node && r.type == "step") {
      const auto step = json::parse(r.body)["step"].get<int64_t>();
      last[r.rank] = std::max(last[r.rank], step);
    }
  return last;
}

// Issue 15's stall watchdog with a node's host frozen: its agent, supervisor
// and ranks stopped, its SSH link still up. The run ends failed naming the
// node and its rank's last step within stall_timeout_s and a margin; after
// the host runs again no process of the run is left anywhere.
TEST(ClusterFrozenHost, EndsTheRunStalledNamingTheNodeAndItsRanksLastStep) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  ClusterControl control(cluster);
  constexpr int kStallTimeoutS = 20;
  // The check runs every second and then asks whether the node's SSH port
  // answers (up to 1 s); the run's end is then stored and the CLI exits.
  constexpr auto kMargin = 10s;
  const auto file =
      control.write("frozen.yaml", two_node_experiment("frozen-host", 100000,
                                                       "epochs: 1000\nstall_timeout_s: " +
                                                           std::to_string(kStallTimeoutS) + "\n"));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();
  // Training, not starting: flh2's rank has stored steps.
  const auto training_by = Clock::now() + 120s;
  while (last_steps(control.store(), run, "flh2").empty() && Clock::now() < training_by)
    std::this_thread::sleep_for(200ms);
  ASSERT_FALSE(last_steps(control.store(), run, "flh2").empty()) << runner->output();

  const auto pids = flotilla_processes(cluster, "flh2");
  ASSERT_GE(pids.size(), 3u) << "expected the agent, its supervisor and a rank on flh2";
  Freeze freeze(pids);
  const auto frozen = Clock::now();
  const size_t stored_at_freeze = contiguous_records_of(control.store(), run, "flh2").size();

  const auto ended = runner->wait(std::chrono::seconds(kStallTimeoutS) + kMargin + 30s);
  ASSERT_TRUE(ended) << runner->output();
  const double detected = std::chrono::duration<double>(Clock::now() - frozen).count();
  EXPECT_EQ(*ended, 1) << runner->output();  // failed
  const auto store = control.store();
  const auto row = store.run(run);
  std::cout << "frozen host detected " << detected << " s after the freeze (stall_timeout_s "
            << kStallTimeoutS << "): " << name_of(row->state) << ": " << row->reason << std::endl;
  EXPECT_LT(detected,
            static_cast<double>((std::chrono::seconds(kStallTimeoutS) + kMargin).count()));
  EXPECT_EQ(row->state, RunState::failed);
  EXPECT_NE(runner->output().find(row->reason), std::string::npos) << runner->output();
  // flh2 holds rank 1; its last step is the last one the controller stored.
  std::smatch named;
  ASSERT_TRUE(std::regex_search(
      row->reason, named,
      std::regex("^stalled: no record for 20 s from node flh2 \\(rank 1 last step ([0-9]+)\\); "
                 "its supervisor or host is not running")))
      << row->reason;
  const auto flh2_steps = last_steps(store, run, "flh2");
  ASSERT_EQ(flh2_steps.count(1), 1u);
  EXPECT_EQ(std::stoll(named[1]), flh2_steps.at(1)) << row->reason;

  // Every record flh2 sent before the freeze is stored, once, in order.
  const auto flh2 = contiguous_records_of(store, run, "flh2");
  EXPECT_GE(flh2.size(), stored_at_freeze);
  const auto flh1 = contiguous_records_of(store, run, "flh1");
  EXPECT_FALSE(flh1.empty());

  // The reachable node was stopped; the frozen one stops once it runs again
  // (it reads the stop, and its own watchdog finds its ranks stalled).
  const auto flh1_clear = seconds_until_nothing_left(cluster, "flh1", 30s);
  EXPECT_TRUE(flh1_clear) << "flh1 still runs " << run_processes(cluster, "flh1").front();
  freeze.thaw();
  const auto flh2_clear = seconds_until_nothing_left(cluster, "flh2", 60s);
  EXPECT_TRUE(flh2_clear) << "flh2 still runs " << run_processes(cluster, "flh2").front();
  if (flh1_clear && flh2_clear)
    std::cout << "no process of the run left on flh1 " << *flh1_clear
              << " s after the run ended, on flh2 " << *flh2_clear << " s after it was let go on; "
              << "flh2: " << flh2.size() << " records stored (" << stored_at_freeze
              << " at the freeze), flh1: " << flh1.size() << std::endl;
}

}  // namespace
}  // namespace flotilla::testing
