#include "memory_watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

namespace flotilla::agent {
namespace {

// How long a group's list of processes is trusted. Looking the group up
// scans all of /proc, too much for every read; a rank's processes are
// usually only the rank itself (flotilla-train starts none), and a child it
// starts is counted from the next lookup on, within a second.
constexpr std::chrono::seconds kMembersRefresh{1};

}  // namespace

std::optional<int64_t> resident_bytes(pid_t pid) {
  // read(2) rather than a stream: this runs for every rank 20 times a second.
  const std::string path = "/proc/" + std::to_string(pid) + "/statm";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char text[128];
  ssize_t n = 0;
  do {
    n = ::read(fd, text, sizeof text - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  long long size = 0, resident = 0;
  if (std::sscanf(text, "%lld %lld", &size, &resident) != 2) return std::nullopt;
  static const long page = ::sysconf(_SC_PAGESIZE);
  return static_cast<int64_t>(resident) * page;
}

MemoryWatchdog::MemoryWatchdog(int64_t limit_bytes) : limit_bytes_(limit_bytes) {
  if (limit_bytes <= 0)
    throw std::invalid_argument(
        "limits.memory_mb: the memory watchdog needs a limit above 0, got " +
        std::to_string(limit_bytes) + " bytes");
}

void MemoryWatchdog::watch(int64_t rank, const ProcessGroupRecord& group) {
  ranks_[rank] = {group, {}, std::nullopt};  // looked up at the next check
}

void MemoryWatchdog::forget(int64_t rank) {
  ranks_.erase(rank);
}

std::vector<MemoryOverrun> MemoryWatchdog::check() {
  std::vector<MemoryOverrun> overruns;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = ranks_.begin(); it != ranks_.end();) {
    auto& watched = it->second;
    if (!watched.members_read || now - *watched.members_read >= kMembersRefresh) {
      watched.members = processes_in_groups({watched.group});
      watched.members_read = now;
    }
    // The sum counts pages that a forked child still shares with its
    // parent twice: a limit errs on the side of the node's memory.
    int64_t resident = 0;
    for (pid_t pid : watched.members) resident += resident_bytes(pid).value_or(0);
    if (resident <= limit_bytes_) {
      ++it;
      continue;
    }
    // SIGKILL, not SIGTERM: a rank past its memory gets no time to take more.
    signal_groups({watched.group}, SIGKILL);
    overruns.push_back({it->first, resident});
    it = ranks_.erase(it);
  }
  return overruns;
}

std::string memory_overrun_words(const MemoryOverrun& overrun, int64_t limit_bytes,
                                 std::optional<int64_t> batch_size) {
  return "out of memory: " + std::to_string(overrun.resident_bytes >> 20) +
         " MiB resident, beyond limits.memory_mb " + std::to_string(limit_bytes >> 20) +
         (batch_size ? " (batch_size " + std::to_string(*batch_size) + ")" : std::string()) +
         "; the agent killed the rank";
}

}  // namespace flotilla::agent
