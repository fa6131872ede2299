// Process identities (agent/src/processes.h, run_directory.h): a pid names
// the recorded process only with the same start time and boot, and only the
// recorded process, or its group's own members, is signalled.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "processes.h"
#include "run_directory.h"

using namespace flotilla::agent;
namespace fs = std::filesystem;

namespace {

// A child of this test that waits to be killed; SIGKILLed and reaped at scope end.
class Child {
 public:
  Child() {
    pid_ = fork();
    if (pid_ == 0) {
      for (;;) pause();
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Reaps it once ended; true then.
  bool ended() {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
    pid_ = -1;
    return true;
  }

 private:
  pid_t pid_ = -1;
};

class TempHome {
 public:
  TempHome() {
    std::string pattern = (fs::temp_directory_path() / "flotilla-identity-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempHome() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Whether `pid` was sent SIGKILL, read right after the call that must not
// have sent it, with no wait: kill(2) marks SIGKILL pending in every thread of
// its target before it returns; the target then starts exiting (PF_EXITING)
// and ends (a zombie, or gone).
bool sigkill_sent(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream status(proc + "/status");
  if (!status) return true;
  uint64_t pending = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
      pending |= std::stoull(line.substr(7), nullptr, 16);
    if (line.rfind("State:", 0) == 0 && line.find_first_of("ZX", 6) != std::string::npos)
      return true;
  }
  if (pending & (uint64_t{1} << (SIGKILL - 1))) return true;
  std::ifstream stat_file(proc + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(stat_file)), {});
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 9 && fields >> field; ++i)
    if (i == 9) return (std::stoull(field) & 0x4) != 0;  // PF_EXITING
  return true;
}

ProcessIdentity own_identity() {
  const auto self = read_identity(getpid());
  EXPECT_TRUE(self);
  return self.value_or(ProcessIdentity{});
}

}  // namespace

TEST(ProcessIdentity, AProcessReadsAsItselfWithItsStartAndThisBoot) {
  const auto self = read_identity(getpid());
  ASSERT_TRUE(self);
  EXPECT_EQ(self->pid, getpid());
  EXPECT_GT(self->start_time, 0u);
  EXPECT_EQ(self->boot_id, current_boot_id());
  EXPECT_EQ(current_boot_id().size(), 36u) << current_boot_id();
  EXPECT_TRUE(matches(*self, read_identity(getpid())));
  EXPECT_EQ(how_it_differs(*self, *self), "");
}

TEST(ProcessIdentity, TheSamePidWithAnotherStartTimeIsAnotherProcess) {
  auto recorded = own_identity();
  recorded.start_time -= 1;
  const auto now = read_identity(getpid());
  EXPECT_FALSE(matches(recorded, now));
  EXPECT_EQ(how_it_differs(recorded, *now),
            "pid " + std::to_string(getpid()) + " started at clock tick " +
                std::to_string(now->start_time) + " after boot, the recorded one at tick " +
                std::to_string(recorded.start_time));
}

TEST(ProcessIdentity, TheSamePidAndStartInAnotherBootIsAnotherProcess) {
  auto recorded = own_identity();
  recorded.boot_id = "00000000-0000-4000-8000-000000000000";
  EXPECT_FALSE(matches(recorded, read_identity(getpid())));
  EXPECT_EQ(how_it_differs(recorded, *read_identity(getpid())),
            "the recorded one ran in another boot (boot id 00000000-0000-4000-8000-000000000000; "
            "this boot is " +
                current_boot_id() + ")");
  recorded.boot_id.clear();  // a record without a boot can never be verified
  EXPECT_FALSE(matches(recorded, read_identity(getpid())));
}

TEST(ProcessIdentity, AnEndedProcessHasNoIdentityAndMatchesNothing) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(read_identity(child));
  EXPECT_FALSE(matches(own_identity(), std::nullopt));
  EXPECT_FALSE(read_identity(0));
  EXPECT_FALSE(read_identity(-1));
}

TEST(ProcessIdentity, OnlyTheRecordedProcessIsSignalled) {
  Child child;
  const auto real = read_identity(child.pid());
  ASSERT_TRUE(real);
  auto earlier = *real;
  earlier.start_time -= 1;
  auto other_boot = *real;
  other_boot.boot_id = "00000000-0000-4000-8000-000000000000";
  EXPECT_FALSE(signal_process(earlier, SIGKILL));
  EXPECT_FALSE(signal_process(other_boot, SIGKILL));
  EXPECT_FALSE(sigkill_sent(child.pid()));
  EXPECT_TRUE(signal_process(*real, SIGKILL));
  int status = 0;
  ASSERT_EQ(waitpid(child.pid(), &status, 0), child.pid());
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

namespace {

// A rank's group whose leader (sh) has ended and been reaped while a child
// of it (a background sleep) is still in the group: the case where the group
// is told by its members' start and session. SIGKILLed at scope end.
class GroupWithoutItsLeader {
 public:
  GroupWithoutItsLeader() {
    auto child = spawn_in_new_group({"/bin/sh", "-c", "sleep 600 & exit 0"}, {});
    close(child.stdout_fd);
    close(child.stderr_fd);
    record_ = child.group;
    waitpid(child.pid, nullptr, 0);
  }
  ~GroupWithoutItsLeader() { kill(-record_.leader.pid, SIGKILL); }
  const ProcessGroupRecord& record() const { return record_; }

 private:
  ProcessGroupRecord record_;
};

}  // namespace

TEST(ProcessGroups, AGroupIsRecordedWithItsLeadersIdentityAndSession) {
  auto child = spawn_in_new_group({"/bin/sh", "-c", "exec sleep 600"}, {});
  close(child.stdout_fd);
  close(child.stderr_fd);
  EXPECT_EQ(child.group.leader.pid, child.pid);
  EXPECT_TRUE(matches(child.group.leader, read_identity(child.pid)));
  EXPECT_EQ(child.group.session, getsid(0));
  EXPECT_EQ(processes_in_groups({child.group}), std::vector<pid_t>{child.pid});
  EXPECT_EQ(strangers_in_group(child.group), "");
  signal_groups({child.group}, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(ProcessGroups, AGroupWhoseLeaderPidIsAnotherProcessIsNotSignalled) {
  auto child = spawn_in_new_group({"/bin/sh", "-c", "exec sleep 600"}, {});
  close(child.stdout_fd);
  close(child.stderr_fd);
  auto forged = child.group;
  forged.leader.start_time -= 1;
  EXPECT_TRUE(processes_in_groups({forged}).empty());
  signal_groups({forged}, SIGKILL);
  EXPECT_FALSE(sigkill_sent(child.pid)) << "the process was signalled";
  EXPECT_EQ(
      strangers_in_group(forged),
      "process group " + std::to_string(child.pid) +
          " is not this run's rank's, for its "
          "leader's pid " +
          std::to_string(child.pid) + " is now another process (pid " + std::to_string(child.pid) +
          " started at clock tick " + std::to_string(child.group.leader.start_time) +
          " after boot, the recorded one at tick " + std::to_string(forged.leader.start_time) +
          "): nothing in it was signalled (pid " + std::to_string(child.pid) + ")");
  kill(child.pid, SIGKILL);
  waitpid(child.pid, nullptr, 0);
}

TEST(ProcessGroups, WithItsLeaderGoneAGroupsOwnMembersAreThoseStartedAfterItInItsSession) {
  GroupWithoutItsLeader group;
  const auto members = processes_in_groups({group.record()});
  ASSERT_EQ(members.size(), 1u) << "the background sleep";
  EXPECT_EQ(strangers_in_group(group.record()), "");

  // Recorded as started later than what runs in the group now: not the run's.
  auto later = group.record();
  later.leader.start_time += 1000000;
  EXPECT_TRUE(processes_in_groups({later}).empty());
  EXPECT_EQ(strangers_in_group(later),
            "process group " + std::to_string(later.leader.pid) +
                " is not this run's rank's, for its rank has ended and these started before it or "
                "in another session: nothing in it was signalled (pid " +
                std::to_string(members[0]) + ")");
  // Recorded in another session: not the run's either.
  auto elsewhere = group.record();
  elsewhere.session += 1;
  EXPECT_TRUE(processes_in_groups({elsewhere}).empty());
  // Recorded in another boot: nothing of it can be running.
  auto other_boot = group.record();
  other_boot.leader.boot_id = "00000000-0000-4000-8000-000000000000";
  EXPECT_TRUE(processes_in_groups({other_boot}).empty());

  signal_groups({later, elsewhere, other_boot}, SIGKILL);
  for (const auto pid : members) EXPECT_FALSE(sigkill_sent(pid)) << pid;
  EXPECT_EQ(processes_in_groups({group.record()}), members) << "a stranger's record signalled it";
  signal_groups({group.record()}, SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!processes_in_groups({group.record()}).empty() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(processes_in_groups({group.record()}).empty());
}

// supervisor.pid and pgids.json as the run directory reads them.
TEST(RunDirectoryIdentity, SupervisorPidIsRunningOnlyWithTheSameIdentity) {
  TempHome home;
  RunDirectory dir(home.path(), "run");
  create_private_directories(dir.path());
  const auto file = dir.path() / "supervisor.pid";
  EXPECT_FALSE(dir.supervisor_running()) << "no file";

  dir.write_supervisor(own_identity());
  EXPECT_TRUE(dir.supervisor_running());
  EXPECT_EQ(dir.supervisor().stranger, "");

  auto earlier = own_identity();
  earlier.start_time -= 1;
  dir.write_supervisor(earlier);
  auto found = dir.supervisor();
  EXPECT_FALSE(found.running);
  EXPECT_FALSE(found.unverifiable);
  EXPECT_EQ(found.stranger.rfind("supervisor.pid names pid " + std::to_string(getpid()) +
                                     ", which is not this run's supervisor (pid ",
                                 0),
            0u)
      << found.stranger;

  std::ofstream(file) << getpid();  // an agent before process identities
  found = dir.supervisor();
  EXPECT_FALSE(found.running);
  EXPECT_TRUE(found.unverifiable);
  EXPECT_EQ(found.stranger, "supervisor.pid holds only pid " + std::to_string(getpid()) +
                                ", as agents before process identities wrote it: a process "
                                "with that pid runs, but whether it is this run's supervisor "
                                "cannot be told, so nothing was signalled");

  std::ofstream(file) << R"({"pid":)" << getpid() << R"(,"start_time":"soon","boot_id":"b"})";
  found = dir.supervisor();
  EXPECT_FALSE(found.running);
  EXPECT_TRUE(found.unverifiable);
  EXPECT_EQ(found.stranger,
            "supervisor.pid cannot be read (\"start_time\" is not a whole number of clock "
            "ticks): nothing was signalled");
}

TEST(RunDirectoryIdentity, ProcessGroupsReadBackAndBareIdsAreNotTrusted) {
  TempHome home;
  RunDirectory dir(home.path(), "run");
  create_private_directories(dir.path());
  const ProcessGroupRecord group{own_identity(), getsid(0)};
  dir.write_process_groups({group, group});
  const auto read = dir.process_groups();
  ASSERT_EQ(read.groups.size(), 2u);
  EXPECT_EQ(read.groups[1].leader.pid, group.leader.pid);
  EXPECT_EQ(read.groups[1].leader.start_time, group.leader.start_time);
  EXPECT_EQ(read.groups[1].leader.boot_id, group.leader.boot_id);
  EXPECT_EQ(read.groups[1].session, group.session);
  EXPECT_EQ(read.unverifiable, "");

  // In a container whose pid namespace began under another process's session
  // (CI's), /proc shows that session as 0: still a group's session.
  dir.write_process_groups({{own_identity(), 0}});
  const auto outer_session = dir.process_groups();
  ASSERT_EQ(outer_session.groups.size(), 1u) << outer_session.unverifiable;
  EXPECT_EQ(outer_session.groups[0].session, 0);

  GroupWithoutItsLeader stranger;
  const auto pgid = std::to_string(stranger.record().leader.pid);
  const auto member = std::to_string(processes_in_groups({stranger.record()}).at(0));
  std::ofstream(dir.path() / "pgids.json") << "[" << pgid << "]";
  const auto bare = dir.process_groups();
  EXPECT_TRUE(bare.groups.empty());
  EXPECT_EQ(bare.unverifiable, "pgids.json holds only process group ids (" + pgid +
                                   "), as agents before process identities wrote it: processes "
                                   "run in them (pid " +
                                   member +
                                   "), but whether they are this run's cannot be told, so "
                                   "nothing was signalled");

  std::ofstream(dir.path() / "pgids.json")
      << R"([{"pid":)" << pgid << R"(,"start_time":1,"boot_id":"b"}])";
  const auto damaged = dir.process_groups();
  EXPECT_TRUE(damaged.groups.empty());
  EXPECT_EQ(damaged.unverifiable,
            "pgids.json cannot be read (entry 1: \"session\" is not a session id): nothing "
            "was signalled");
}
