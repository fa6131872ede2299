#pragma once
// The POSIX process work of the agent: starting ranks in their own process
// groups, signalling groups, and finding what is left of them in /proc.
//
// A pid alone names a process only while it runs: after a reboot, or once
// pids wrap on a busy node, the same number is someone else's. So every
// process the agent may signal later is recorded with its identity, and
// signalled only while that identity still holds.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace flotilla::agent {

// What tells one process from every other on a node: its pid, when it
// started (clock ticks after boot, field 22 of /proc/PID/stat) and the boot
// it started in (/proc/sys/kernel/random/boot_id).
struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_time = 0;
  std::string boot_id;
};

// This boot's id; throws std::runtime_error when /proc does not say.
const std::string& current_boot_id();
// The process `pid` as it is now (a zombie too); nothing when there is none.
std::optional<ProcessIdentity> read_identity(pid_t pid);
// Whether `now` (what read_identity(recorded.pid) found) is the process `recorded` names.
bool matches(const ProcessIdentity& recorded, const std::optional<ProcessIdentity>& now);
// Why the process that has `recorded.pid` now is not the one recorded, in
// words (its start, or its boot); for a `now` that matches, empty.
std::string how_it_differs(const ProcessIdentity& recorded, const ProcessIdentity& now);
// Sends `signal` to the process `recorded` names only while it is still that
// process (a pidfd closes the gap between the check and the signal where the
// kernel has one). True when it was sent.
bool signal_process(const ProcessIdentity& recorded, int signal);

// A rank's process group as the supervisor started it: the group's id is its
// leader's pid, so the leader's identity and the session it was started in
// are what tell the group's processes from a later group with the same id
// (see look_at_group in processes.cpp for the reasoning).
struct ProcessGroupRecord {
  ProcessIdentity leader;
  pid_t session = 0;
};

struct ChildProcess {
  pid_t pid = -1;  // also its process group id
  int stdout_fd = -1;
  int stderr_fd = -1;
  ProcessGroupRecord group;  // read from /proc as it started
};

// Starts `argv` with `extra_env` added to this process's environment, as the
// leader of a new process group, stdin from /dev/null and stdout/stderr on pipes.
// The child gets SIGKILL when the calling thread ends
// (PR_SET_PDEATHSIG: the kernel ties it to the thread that forked), so call
// this from a thread that lives as long as the process: ranks die with their
// supervisor rather than train on unseen. Throws std::runtime_error when it
// cannot be started.
ChildProcess spawn_in_new_group(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& extra_env);

// Starts `argv` fully detached (its own session, reparented to init) with
// stdin/stdout on /dev/null and stderr appended to `log`. Returns once it runs.
void spawn_detached(const std::vector<std::string>& argv, const std::filesystem::path& log);

// Sends `signal` to the processes of the recorded groups, and to nothing
// that only has the same numbers (see look_at_group in processes.cpp).
void signal_groups(const std::vector<ProcessGroupRecord>& groups, int signal);
// Every live process (zombies excluded) of the recorded groups, read from /proc.
std::vector<pid_t> processes_in_groups(const std::vector<ProcessGroupRecord>& groups);
// SIGKILLs the recorded groups until none of their processes is left, for at
// most 30 s; what is left then (uninterruptible processes), else nothing.
std::vector<pid_t> kill_groups(const std::vector<ProcessGroupRecord>& groups);
// kill_groups' survivors in words: "N process(es) of the run survive SIGKILL,
// first pid P"; empty for none.
std::string survivors_words(const std::vector<pid_t>& left);
// When processes run in the group's id that are not the recorded group's,
// why, in words naming the group and them; otherwise empty.
std::string strangers_in_group(const ProcessGroupRecord& group);
// Every live process whose process group is one of `pgids`, whoever's it is:
// for telling what a file of bare numbers would have hit, never for signalling.
std::vector<pid_t> any_processes_in_groups(const std::vector<int>& pgids);

// Alive and not a zombie (an unreaped process still answers kill(pid, 0)).
bool process_running(pid_t pid);

std::filesystem::path own_executable();

}  // namespace flotilla::agent
