// The SLURM test cluster (cluster.sh --slurm): a real slurmctld, slurmd and
// munge on the namespace hosts, used as a user would, over SSH on the login
// node; and nothing of it left once the fixture is gone. Needs root and
// Debian's slurm-wlm; skips saying why without them.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "processes.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;

#define SKIP_WITHOUT_SLURM_CLUSTER()                                            \
  do {                                                                          \
    std::string why;                                                            \
    if (!TestCluster::available(&why, ClusterKind::slurm)) GTEST_SKIP() << why; \
  } while (false)

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.insert(line);
  return lines;
}

// `node`'s state as `sinfo` on the login node says it, with SLURM's flag
// characters (down*: not responding) and a line break.
std::string node_state(const TestCluster& cluster, const std::string& node) {
  return cluster.ssh("flh1", "sinfo -h -n " + node + " -o %T");
}

// Polls sinfo until `node`'s state is `wanted` or `limit` passes; the last state seen.
std::string wait_for_state(const TestCluster& cluster, const std::string& node,
                           const std::string& wanted, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string state;
  while (std::chrono::steady_clock::now() < deadline) {
    state = node_state(cluster, node);
    while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) state.pop_back();
    if (state == wanted) break;
    std::this_thread::sleep_for(250ms);
  }
  return state;
}

TEST(SlurmCluster, EveryHostIsAnIdleNodeOfOnePartitionAndAJobRunsOnAllOfThem) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  TestCluster cluster(3, ClusterKind::slurm);
  ASSERT_TRUE(std::filesystem::exists(cluster.slurm_conf()));
  // What a user of the login node sees, without naming the config.
  EXPECT_EQ(lines_of(cluster.ssh("flh1", "sinfo -h -N -o '%N %P %T'")),
            (std::set<std::string>{"flh1 debug* idle", "flh2 debug* idle", "flh3 debug* idle"}));
  // A batch job over all three: srun starts one task on each, as its user.
  const auto output = cluster.ssh(
      "flh1",
      "sbatch --wait -N 3 -o \"$HOME/job.out\" --wrap 'srun sh -c \"hostname; id -un\"' "
      ">/dev/null && cat \"$HOME/job.out\"");
  const auto login = cluster.host("flh1").user;
  EXPECT_EQ(lines_of(output), (std::set<std::string>{"flh1", "flh2", "flh3", login}));
}

TEST(SlurmCluster, AKilledSlurmdLeavesItsNodeNotRespondingUntilItIsStartedAgain) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  TestCluster cluster(2, ClusterKind::slurm);
  cluster.slurmd("flh2", false);
  // SlurmdTimeout is 10 s: slurmctld marks the node down after missing it.
  EXPECT_EQ(wait_for_state(cluster, "flh2", "down*", 60s), "down*");
  EXPECT_EQ(wait_for_state(cluster, "flh1", "idle", 1s), "idle");
  cluster.slurmd("flh2", true);
  // ReturnToService=2: a node that registers again is back.
  EXPECT_EQ(wait_for_state(cluster, "flh2", "idle", 60s), "idle");
}

TEST(SlurmCluster, DestructorLeavesNoDaemonOfItsOwn) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  std::string dir;
  {
    TestCluster cluster(2, ClusterKind::slurm);
    dir = cluster.dir().string();
    ASSERT_EQ(live_processes_with({"munged", dir}).size(), 1u);
    ASSERT_EQ(live_processes_with({"slurmd", dir}).size(), 2u);
    ASSERT_EQ(live_processes_with({"slurmctld", dir}).size(), 1u);
  }
  EXPECT_TRUE(live_processes_with({dir}).empty());
}

}  // namespace
}  // namespace flotilla::testing
