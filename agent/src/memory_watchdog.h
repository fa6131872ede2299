#pragma once
// `limits.memory_mb` on a CPU rank: the supervisor reads each rank's resident
// memory a few times a second and SIGKILLs a rank that holds more, so that
// the run ends `oom` as a full GPU would end it.
//
// Not RLIMIT_DATA, which the agent used before: OpenBLAS, whose threads make
// LibTorch's matrix products several times faster, retries a failed mmap of
// its buffers forever under it, so a rank at its limit spun instead of ending.
// Resident memory is what a node runs out of, and reading it needs nothing
// from the rank: whatever allocator or library grows, the watchdog sees it.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "processes.h"

namespace flotilla::agent {

// How often the supervisor reads its ranks' resident memory: a rank that
// touches new memory at a few GB/s passes its limit by at most a few hundred
// MiB before it is killed, and a read of /proc/PID/statm per rank costs
// microseconds.
inline constexpr std::chrono::milliseconds kMemoryWatchInterval{50};

// The resident memory of `pid` in bytes (/proc/PID/statm: its pages in RAM,
// its own and the shared libraries' it touched); nothing once it is gone.
std::optional<int64_t> resident_bytes(pid_t pid);

// A rank the watchdog killed: its resident memory (all its group's
// processes together) when it was seen beyond the limit.
struct MemoryOverrun {
  int64_t rank = 0;
  int64_t resident_bytes = 0;
};

class MemoryWatchdog {
 public:
  // `limit_bytes` above 0: what each rank's group may hold resident.
  explicit MemoryWatchdog(int64_t limit_bytes);

  int64_t limit_bytes() const { return limit_bytes_; }

  // Watches the rank whose process group is `group` (its leader the rank).
  void watch(int64_t rank, const ProcessGroupRecord& group);
  // Stops watching it (it has ended).
  void forget(int64_t rank);

  // Reads each watched rank's resident memory. A rank beyond the limit gets
  // SIGKILL, to its whole group, is no longer watched and is returned; the
  // others are left alone. Call it every kMemoryWatchInterval.
  std::vector<MemoryOverrun> check();

 private:
  struct Watched {
    ProcessGroupRecord group;
    std::vector<pid_t> members;  // the group's processes as last looked up
    std::optional<std::chrono::steady_clock::time_point> members_read;  // nothing: not yet
  };
  int64_t limit_bytes_;
  std::map<int64_t, Watched> ranks_;
};

// Why the watchdog killed a rank, e.g. "out of memory: 612 MiB resident,
// beyond limits.memory_mb 450 (batch_size 2048); the agent killed the rank"
// (the run's end says "rank 1: " before it, as for any rank's failure). The
// batch is named as the engine names it when LibTorch's allocator fails, so
// both read alike in a sweep's reasons.
std::string memory_overrun_words(const MemoryOverrun& overrun, int64_t limit_bytes,
                                 std::optional<int64_t> batch_size);

}  // namespace flotilla::agent
