// A window's local agent runs niced below the window (issue 22); its ranks
// must stay below it too. The supervisor starts a new session, and with
// autogroup scheduling (the default of desktop kernels) a session is a
// scheduling group of its own whose nice value, not its processes', decides
// its share against the window's group: before, that group was at nice 0.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent_process.h"
#include "temp_dir.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::string autogroup_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/autogroup");
  std::string line;
  std::getline(in, line);
  return line;  // "/autogroup-4154 nice 0"
}

TEST(AgentPriority, ANicedAgentsRanksRunInASchedulingGroupAsNicedAsTheAgent) {
  if (!std::filesystem::exists("/proc/self/autogroup"))
    GTEST_SKIP() << "this kernel schedules without autogroups: the ranks' nice values alone count";
  TempDir home;
  const auto rank = home.write("fake-train.sh", "#!/bin/sh\nexec sleep 600\n");
  std::filesystem::permissions(rank, std::filesystem::perms::owner_all);
  std::vector<int> pgids;
  struct KillLeft {  // no rank of this test outlives it, whatever fails below
    std::vector<int>& pgids;
    ~KillLeft() {
      for (int pid : alive_in(pgids)) kill(pid, SIGKILL);
    }
  } kill_left{pgids};
  AgentProcess agent(home.path(), {}, rank.string(), 10);
  agent.hello();
  agent.send(start_message("run-niced", 1, 1));
  const auto started = agent.until([](const json& m) { return m["type"] == "started"; }, 30s);
  pgids = pgids_of(started);
  ASSERT_EQ(pgids.size(), 2u);
  const std::string own_group = autogroup_of(getpid());
  for (const int rank_pid : pgids) {
    errno = 0;
    EXPECT_EQ(getpriority(PRIO_PROCESS, id_t(rank_pid)), 10) << "rank " << rank_pid;
    const std::string group = autogroup_of(rank_pid);
    EXPECT_NE(group, own_group) << "the supervisor's session is a group of its own";
    EXPECT_EQ(group.substr(group.find(' ')), " nice 10") << "rank " << rank_pid << ": " << group;
  }
}

}  // namespace
}  // namespace flotilla::testing
