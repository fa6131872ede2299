// The controller's stall watchdog on the local node, through the `flotilla`
// CLI: the run's supervisor and its ranks frozen together (SIGSTOP). Nothing
// of the run runs to notice, and the agent has nothing to send; the
// controller notices. (The local agent is the CLI's child and is left
// running, so that the stop reaches it; the cluster test, tests/cluster as
// root, freezes one host's agent too.)
#include <signal.h>

#include <iostream>

#include "cli_fixture.h"

namespace flotilla::testing {
namespace {

using controller::RunState;
using nlohmann::json;

// Stops processes as a frozen host would; they go on when it goes out of
// scope, also when the test fails.
class Freeze {
 public:
  explicit Freeze(std::vector<pid_t> pids) : pids_(std::move(pids)) {
    for (pid_t pid : pids_) ::kill(pid, SIGSTOP);
  }
  ~Freeze() { thaw(); }
  Freeze(const Freeze&) = delete;
  Freeze& operator=(const Freeze&) = delete;
  void thaw() {
    for (pid_t pid : pids_) ::kill(pid, SIGCONT);
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;
};

TEST(StallWatchdog, AFrozenNodeEndsTheRunFailedNamingItAndItsRanksLastSteps) {
  Flotilla f;
  constexpr int kStallTimeoutS = 10;
  auto [runner, run] = f.run_in_background(
      two_ranks("frozen", "epochs: 50\nstall_timeout_s: " + std::to_string(kStallTimeoutS) + "\n"),
      20);
  ASSERT_FALSE(run.empty());
  // Training, not starting: each rank has stored steps.
  const auto training_by = std::chrono::steady_clock::now() + 60s;
  while ((bodies_of(f.store().records(run), "step", 0).empty() ||
          bodies_of(f.store().records(run), "step", 1).empty()) &&
         std::chrono::steady_clock::now() < training_by)
    std::this_thread::sleep_for(100ms);
  // The run's supervisor and its ranks.
  std::vector<pid_t> node = live_processes_with({"supervise", f.home(), run});
  ASSERT_EQ(node.size(), 1u);
  const auto ranks = ranks_alive(run);
  ASSERT_EQ(ranks.size(), 2u);
  node.insert(node.end(), ranks.begin(), ranks.end());

  Freeze freeze(node);
  const auto frozen_at = std::chrono::steady_clock::now();
  ASSERT_EQ(runner->wait(60s), 1) << runner->output();  // failed
  const double after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen_at).count();
  const auto row = f.store().run(run);
  std::cout << "frozen node noticed " << after_s << " s after the freeze (stall_timeout_s "
            << kStallTimeoutS << ")" << std::endl;
  EXPECT_EQ(row->state, RunState::failed);
  // Each rank's last step is the last one stored for it.
  std::map<int64_t, int64_t> last;
  for (const auto& r : f.store().records(run))
    if (r.type == "step")
      last[r.rank] = std::max(last[r.rank], json::parse(r.body)["step"].get<int64_t>());
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(row->reason, "stalled: no record for 10 s from node local (rank 0 last step " +
                             std::to_string(last[0]) + ", rank 1 last step " +
                             std::to_string(last[1]) + "); its supervisor or host is not running")
      << "after " << after_s << " s";
  EXPECT_NE(runner->output().find(row->reason), std::string::npos) << runner->output();
  EXPECT_GE(after_s, kStallTimeoutS - 1.0) << "ended before the node was silent that long";

  // Once they run again the ranks stop: the agent passed the stop on to the
  // frozen supervisor as a SIGTERM, which it reads as soon as it runs.
  freeze.thaw();
  std::vector<pid_t> left;
  const auto thawed = std::chrono::steady_clock::now();
  do {
    left = live_processes_with({f.home(), run});
    if (left.empty()) break;
    std::this_thread::sleep_for(100ms);
  } while (std::chrono::steady_clock::now() - thawed < 30s);
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) of " << run << " alive 30 s after";
  // What the node sent before the freeze is stored, once, in order.
  const auto records = f.store().records(run);
  for (size_t i = 0; i < records.size(); ++i)
    ASSERT_EQ(records[i].seq, static_cast<int64_t>(i + 1)) << "seq gap or repeat at " << i;
}

}  // namespace
}  // namespace flotilla::testing
