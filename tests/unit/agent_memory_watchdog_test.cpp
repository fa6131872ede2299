// The supervisor's memory watchdog (agent/src/memory_watchdog.h) against real
// processes that allocate and touch memory: a rank's group beyond the limit
// is SIGKILLed and named with what it held, one within it is left alone.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "memory_watchdog.h"
#include "processes.h"

using namespace flotilla::agent;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// python3 that touches `mib` MiB (bytes filled with 'x', so every page is
// resident), prints "ready" and waits to be killed. With `forever`, it goes
// on touching 8 MiB more at a time up to 2 GiB instead, so that a watchdog
// that failed to kill it still leaves the machine its memory.
std::string grower(int mib, bool forever = false) {
  return "import signal, sys\n"
         "chunks = []\n"
         "while len(chunks) * 8 < " +
         std::to_string(forever ? 2048 : mib) +
         ":\n"
         "    chunks.append(b'x' * (8 << 20))\n"
         "print('ready', flush=True)\n"
         "signal.pause()\n";
}

// A rank-like process group started by spawn_in_new_group, as the supervisor
// starts ranks; SIGKILLed and reaped at scope end.
class Group {
 public:
  explicit Group(const std::vector<std::string>& argv) : child_(spawn_in_new_group(argv, {})) {
    close(child_.stderr_fd);
  }
  ~Group() {
    ::kill(-child_.pid, SIGKILL);
    if (!reaped_) waitpid(child_.pid, nullptr, 0);
    close(child_.stdout_fd);
  }
  const ProcessGroupRecord& record() const { return child_.group; }

  // Waits for "ready" on its stdout, at most a minute; true once it came.
  bool ready() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    std::string out;
    while (out.find("ready\n") == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      pollfd fd{child_.stdout_fd, POLLIN, 0};
      if (::poll(&fd, 1, static_cast<int>(left)) <= 0) continue;
      char buffer[256];
      const ssize_t n = ::read(child_.stdout_fd, buffer, sizeof buffer);
      if (n == 0) return false;  // it ended without saying it
      if (n > 0) out.append(buffer, static_cast<size_t>(n));
    }
    return true;
  }

  // Its leader's wait status once it ended; blocks until then.
  int wait_status() {
    int status = 0;
    waitpid(child_.pid, &status, 0);
    reaped_ = true;
    return status;
  }

  // Whether its leader has ended (reaping it then), without waiting.
  bool ended() {
    if (reaped_) return true;
    reaped_ = waitpid(child_.pid, nullptr, WNOHANG) == child_.pid;
    return reaped_;
  }

 private:
  ChildProcess child_;
  bool reaped_ = false;
};

bool killed_by_sigkill(int status) {
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

}  // namespace

TEST(MemoryWatchdog, ResidentBytesReadsAProcessesPagesInMemory) {
  Group group({"/usr/bin/python3", "-c", grower(64)});
  ASSERT_TRUE(group.ready());
  const auto resident = resident_bytes(group.record().leader.pid);
  ASSERT_TRUE(resident);
  EXPECT_GE(*resident, 64 * kMiB);
  EXPECT_FALSE(resident_bytes(-1));
}

// Watches `group` as `rank`: one check finds it beyond the limit holding at
// least `held` bytes, and its leader died of SIGKILL.
void expect_killed_for_holding(MemoryWatchdog& watchdog, Group& group, int64_t rank, int64_t held) {
  watchdog.watch(rank, group.record());
  const auto overruns = watchdog.check();
  ASSERT_EQ(overruns.size(), 1u);
  EXPECT_EQ(overruns[0].rank, rank);
  EXPECT_GE(overruns[0].resident_bytes, held);
  EXPECT_TRUE(killed_by_sigkill(group.wait_status()));
}

TEST(MemoryWatchdog, ARankBeyondTheLimitIsKilledAndNamedWithWhatItHeld) {
  Group group({"/usr/bin/python3", "-c", grower(256)});
  ASSERT_TRUE(group.ready());
  MemoryWatchdog watchdog(128 * kMiB);
  expect_killed_for_holding(watchdog, group, 3, 256 * kMiB);
  EXPECT_TRUE(watchdog.check().empty()) << "a killed rank is no longer watched";
}

TEST(MemoryWatchdog, ARankWithinTheLimitIsLeftAlone) {
  Group group({"/usr/bin/python3", "-c", grower(16)});
  ASSERT_TRUE(group.ready());
  MemoryWatchdog watchdog(512 * kMiB);
  watchdog.watch(0, group.record());
  EXPECT_TRUE(watchdog.check().empty());
  EXPECT_FALSE(group.ended());
}

// The memory is held by a child of the rank, not the rank itself: the
// group's processes count together.
TEST(MemoryWatchdog, TheMemoryOfTheRanksChildrenCounts) {
  Group group({"/bin/sh", "-c", "/usr/bin/python3 -c \"$0\" & wait", grower(256)});
  ASSERT_TRUE(group.ready());
  MemoryWatchdog watchdog(128 * kMiB);
  expect_killed_for_holding(watchdog, group, 1, 256 * kMiB);
  // The child, SIGKILLed with its group, ends once it has given its memory back.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!processes_in_groups({group.record()}).empty() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(processes_in_groups({group.record()}).empty()) << "the child was not killed";
}

// As the supervisor uses it: checked every kMemoryWatchInterval while the
// rank grows, until it is killed (a minute at most, then the test fails).
TEST(MemoryWatchdog, AGrowingRankIsKilledOnceItPassesTheLimit) {
  Group group({"/usr/bin/python3", "-c", grower(0, /*forever=*/true)});
  MemoryWatchdog watchdog(200 * kMiB);
  watchdog.watch(0, group.record());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  std::vector<MemoryOverrun> overruns;
  while (overruns.empty() && !group.ended() && std::chrono::steady_clock::now() < deadline) {
    overruns = watchdog.check();
    if (overruns.empty()) std::this_thread::sleep_for(kMemoryWatchInterval);
  }
  ASSERT_EQ(overruns.size(), 1u) << "not killed within a minute";
  EXPECT_GT(overruns[0].resident_bytes, 200 * kMiB);
  EXPECT_TRUE(killed_by_sigkill(group.wait_status()));
}

TEST(MemoryWatchdog, AForgottenRankIsNoLongerWatched) {
  Group group({"/usr/bin/python3", "-c", grower(256)});
  ASSERT_TRUE(group.ready());
  MemoryWatchdog watchdog(128 * kMiB);
  watchdog.watch(0, group.record());
  watchdog.forget(0);
  EXPECT_TRUE(watchdog.check().empty());
  EXPECT_FALSE(group.ended());
}

TEST(MemoryWatchdog, ItsWordsNameWhatTheRankHeldTheLimitAndTheBatch) {
  EXPECT_EQ(memory_overrun_words({2, 612 * kMiB + 5}, 450 * kMiB, 2048),
            "out of memory: 612 MiB resident, beyond limits.memory_mb 450 (batch_size 2048); the "
            "agent killed the rank");
  EXPECT_EQ(memory_overrun_words({0, 700 * kMiB}, 512 * kMiB, std::nullopt),
            "out of memory: 700 MiB resident, beyond limits.memory_mb 512; the agent killed the "
            "rank");
}

TEST(MemoryWatchdog, ALimitOfNothingIsRefusedNamingTheKey) {
  try {
    MemoryWatchdog watchdog(0);
    FAIL() << "a limit of 0 was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("limits.memory_mb"), std::string::npos) << e.what();
  }
}
