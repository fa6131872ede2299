#pragma once
// The POSIX process work of the agent: starting ranks in their own process
// groups, signalling groups, and finding what is left of them in /proc.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace flotilla::agent {

struct ChildProcess {
  pid_t pid = -1;  // also its process group id
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Starts `argv` with `extra_env` added to this process's environment, as the
// leader of a new process group, stdin from /dev/null and stdout/stderr on pipes.
// A `data_limit_bytes` above 0 becomes the child's RLIMIT_DATA (soft and hard)
// before it execs, so that its allocations beyond it fail (ENOMEM) from its
// first instruction on. Throws std::runtime_error when it cannot be started.
ChildProcess spawn_in_new_group(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& extra_env,
                                int64_t data_limit_bytes = 0);

// Starts `argv` fully detached (its own session, reparented to init) with
// stdin/stdout on /dev/null and stderr appended to `log`. Returns once it runs.
void spawn_detached(const std::vector<std::string>& argv, const std::filesystem::path& log);

void signal_groups(const std::vector<int>& pgids, int signal);
// Every live process (zombies excluded) whose process group is one of `pgids`, read from /proc.
std::vector<pid_t> processes_in_groups(const std::vector<int>& pgids);

// Alive and not a zombie (an unreaped process still answers kill(pid, 0)).
bool process_running(pid_t pid);

std::filesystem::path own_executable();

}  // namespace flotilla::agent
