// What the agent signals when a run's pid files name processes that are not
// the run's: after a reboot or a pid wrap, supervisor.pid and pgids.json may
// name anyone's process. Here they name a `sleep` the test started (a
// Stranger): stop and orphan cleanup leave it running and the run's end says
// that nothing was signalled. And the other way round: a run's ranks die
// with their supervisor even when no agent is there to clean up.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "agent_process.h"
#include "processes.h"
#include "temp_dir.h"

namespace flotilla::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A run directory as an agent leaves it (its start request), its supervisor
// and ranks gone; the test writes what names their processes.
std::filesystem::path planted_run(const TempDir& home, const std::string& run) {
  const auto dir = home.path() / "runs" / run;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "start.json") << start_message(run, 1, 1).dump();
  return dir;
}

void write(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file) << text;
}

json identity(int pid, uint64_t start_time, const std::string& boot_id) {
  return {{"pid", pid}, {"start_time", start_time}, {"boot_id", boot_id}};
}

// Sends a stop for `run` and returns the run_end the agent answers with.
json stop_and_wait_for_the_end(const std::filesystem::path& home, const std::string& run) {
  AgentProcess agent(home);
  agent.hello();
  agent.send({{"v", 1}, {"type", "stop"}, {"run", run}});
  const auto messages = agent.until(is_end, 40s);
  return messages.empty() ? json{} : messages.back();
}

constexpr const char* kAnotherBoot = "00000000-0000-4000-8000-000000000000";

// The repro: a pid file from before process identities (a bare pid)
// names a live process that is not the supervisor. Before, the stop sent it
// SIGTERM and reported "its ranks were stopped".
TEST(AgentIdentity, StopLeavesAStrangerNamedByABareSupervisorPidRunning) {
  TempDir home;
  Stranger stranger;
  const auto dir = planted_run(home, "run-stale");
  write(dir / "supervisor.pid", std::to_string(stranger.pid()));
  const auto end = stop_and_wait_for_the_end(home.path(), "run-stale");
  ASSERT_EQ(end["type"], "run_end") << end;
  EXPECT_TRUE(stranger.running()) << "the agent signalled a process that is not the run's";
  EXPECT_EQ(end["outcome"], "failed") << end;
  const auto message = end["message"].get<std::string>();
  EXPECT_NE(message.find("supervisor.pid holds only pid " + std::to_string(stranger.pid()) +
                         ", as agents before process identities wrote it"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("nothing was signalled"), std::string::npos) << message;
}

// supervisor.pid with an identity that is not the process with that pid now:
// another start time (the pid was given out again) or another boot.
TEST(AgentIdentity, StopLeavesAStrangerWithTheSupervisorsPidButAnotherIdentityRunning) {
  TempDir home;
  Stranger stranger;
  const auto started = start_time_of(stranger.pid());
  const std::vector<std::pair<json, std::string>> forged{
      {identity(stranger.pid(), started - 1, this_boot_id()),
       "after boot, the recorded one at tick " + std::to_string(started - 1)},
      {identity(stranger.pid(), started, kAnotherBoot),
       std::string("the recorded one ran in another boot (boot id ") + kAnotherBoot}};
  int n = 0;
  for (const auto& [file, words] : forged) {
    const std::string run = "run-forged-" + std::to_string(++n);
    write(planted_run(home, run) / "supervisor.pid", file.dump());
    const auto end = stop_and_wait_for_the_end(home.path(), run);
    ASSERT_EQ(end["type"], "run_end") << end;
    EXPECT_TRUE(stranger.running()) << file;
    // The supervisor recorded is certainly gone: the stop ends the run as killed.
    EXPECT_EQ(end["outcome"], "killed") << end;
    const auto message = end["message"].get<std::string>();
    EXPECT_NE(message.find("supervisor.pid names pid " + std::to_string(stranger.pid()) +
                           ", which is not this run's supervisor ("),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(words), std::string::npos) << message;
    EXPECT_NE(message.find("): nothing was signalled"), std::string::npos) << message;
  }
}

// pgids.json from before process identities names the stranger's group.
// Before, both the stop and the follower's orphan cleanup SIGKILLed it.
TEST(AgentIdentity, StopAndOrphanCleanupLeaveAStrangersGroupNamedByBarePgidsRunning) {
  TempDir home;
  Stranger stranger;
  const std::string pgids = "[" + std::to_string(stranger.pid()) + "]";
  write(planted_run(home, "run-stopped") / "pgids.json", pgids);
  const auto end = stop_and_wait_for_the_end(home.path(), "run-stopped");
  ASSERT_EQ(end["type"], "run_end") << end;
  EXPECT_TRUE(stranger.running()) << "the stop signalled a process group that is not the run's";
  EXPECT_EQ(end["outcome"], "failed") << end;
  const auto words = "pgids.json holds only process group ids (" + std::to_string(stranger.pid()) +
                     "), as agents before process identities wrote it: processes run in them "
                     "(pid " +
                     std::to_string(stranger.pid()) +
                     "), but whether they are this run's cannot be told, so nothing was signalled";
  EXPECT_NE(end["message"].get<std::string>().find(words), std::string::npos) << end;

  // Orphan cleanup: a stream of the run finds no supervisor and ends it.
  write(planted_run(home, "run-orphaned") / "pgids.json", pgids);
  AgentProcess agent(home.path());
  agent.hello();
  agent.send({{"v", 1}, {"type", "resume"}, {"run", "run-orphaned"}, {"after_seq", 0}});
  const auto messages = agent.until(is_end, 40s);
  ASSERT_FALSE(messages.empty());
  ASSERT_EQ(messages.back()["type"], "run_end") << messages.back();
  EXPECT_TRUE(stranger.running()) << "orphan cleanup signalled a group that is not the run's";
  EXPECT_NE(messages.back()["message"].get<std::string>().find(words), std::string::npos)
      << messages.back();
}

// pgids.json with an identity whose leader's pid is now another process.
TEST(AgentIdentity, StopLeavesAStrangersGroupWhoseLeaderIsNotTheRecordedRankRunning) {
  TempDir home;
  Stranger stranger;
  auto group = identity(stranger.pid(), start_time_of(stranger.pid()) - 1, this_boot_id());
  group["session"] = getsid(stranger.pid());
  write(planted_run(home, "run-forged-group") / "pgids.json", json::array({group}).dump());
  const auto end = stop_and_wait_for_the_end(home.path(), "run-forged-group");
  ASSERT_EQ(end["type"], "run_end") << end;
  EXPECT_TRUE(stranger.running());
  EXPECT_EQ(end["outcome"], "killed") << end;
  const auto message = end["message"].get<std::string>();
  EXPECT_NE(message.find("process group " + std::to_string(stranger.pid()) +
                         " is not this run's rank's, for its leader's pid " +
                         std::to_string(stranger.pid()) + " is now another process ("),
            std::string::npos)
      << message;
  EXPECT_NE(
      message.find("): nothing in it was signalled (pid " + std::to_string(stranger.pid()) + ")"),
      std::string::npos)
      << message;
}

// The supervisor's own cleanup when it fails to start a rank: it ends what
// pgids.json names. Before, a stale file there was SIGKILLed.
TEST(AgentIdentity, ASupervisorThatCannotStartARankLeavesAStrangerInPgidsRunning) {
  TempDir home;
  Stranger stranger;
  const auto dir = planted_run(home, "run-unstartable");
  write(dir / "pgids.json", "[" + std::to_string(stranger.pid()) + "]");
  ChildProcess supervisor(
      {FLOTILLA_AGENT_BINARY, "supervise", "--home", home.path().string(), "--run",
       "run-unstartable", "--train-binary", (home.path() / "no-such-train").string()},
      home.path() / "supervisor.out");
  ASSERT_EQ(supervisor.wait(60s), 1) << supervisor.output();
  EXPECT_TRUE(stranger.running());
  std::ifstream final_file(dir / "final.json");
  const auto final_state = json::parse(final_file, nullptr, false);
  ASSERT_TRUE(final_state.is_object());
  EXPECT_EQ(final_state["outcome"], "failed");
  const auto message = final_state["message"].get<std::string>();
  EXPECT_EQ(message.rfind("cannot start " + (home.path() / "no-such-train").string(), 0), 0u)
      << message;
  EXPECT_NE(message.find("so nothing was signalled"), std::string::npos) << message;
}

// Ranks die with their supervisor (PR_SET_PDEATHSIG) even with no agent
// session left to notice: before, they ran on with no one to stop them.
TEST(AgentIdentity, RanksDieWhenTheirSupervisorIsKilled) {
  TempDir home;
  const auto rank = home.write("fake-train.sh", "#!/bin/sh\nexec sleep 600\n");
  std::filesystem::permissions(rank, std::filesystem::perms::owner_all);
  std::vector<int> pgids;
  // Whatever happens below, no rank of this test outlives it.
  struct KillLeft {
    std::vector<int>& pgids;
    ~KillLeft() {
      for (int pid : alive_in(pgids)) kill(pid, SIGKILL);
    }
  } kill_left{pgids};
  {
    AgentProcess agent(home.path(), {}, rank.string());
    agent.hello();
    agent.send(start_message("run-pdeathsig", 1, 1));
    const auto started = agent.until([](const json& m) { return m["type"] == "started"; }, 30s);
    pgids = pgids_of(started);
  }  // the session ends here: no follower is left to end the run
  ASSERT_EQ(pgids.size(), 2u);
  ASSERT_EQ(alive_in(pgids).size(), 2u) << "both ranks run";
  const int supervisor = supervisor_pid_in(home.path() / "runs" / "run-pdeathsig");
  ASSERT_GT(supervisor, 1);
  ASSERT_EQ(kill(supervisor, SIGKILL), 0);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!alive_in(pgids).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(alive_in(pgids).empty()) << "ranks outlived their supervisor";
}

}  // namespace
}  // namespace flotilla::testing
