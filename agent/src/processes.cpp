#include "processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace flotilla::agent {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> merged_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    const auto name = entry.substr(0, entry.find('='));
    if (!extra.count(name)) env.push_back(std::move(entry));
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void check(int rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string(what) + ": " + std::strerror(rc));
}

// What /proc/PID/stat says of a process.
struct ProcStat {
  pid_t pid = 0;
  char state = 0;  // 'Z': a zombie, ended but not yet reaped
  pid_t pgrp = 0;
  pid_t session = 0;
  uint64_t start_time = 0;  // clock ticks after boot
};

std::optional<ProcStat> read_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // pid (comm) state ppid pgrp session ... starttime (field 22); comm may
  // hold spaces and parentheses, so the fields are counted from its end.
  const auto close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close_paren + 1));
  std::vector<std::string> field;  // field[0] is field 3 (state)
  for (std::string f; field.size() < 20 && fields >> f;) field.push_back(f);
  if (field.size() < 20 || field[0].size() != 1) return std::nullopt;
  ProcStat stat;
  stat.pid = pid;
  stat.state = field[0][0];
  stat.pgrp = static_cast<pid_t>(std::strtol(field[2].c_str(), nullptr, 10));
  stat.session = static_cast<pid_t>(std::strtol(field[3].c_str(), nullptr, 10));
  stat.start_time = std::strtoull(field[19].c_str(), nullptr, 10);
  return stat;
}

// Every process in /proc, as one snapshot.
std::vector<ProcStat> all_processes() {
  std::vector<ProcStat> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (auto stat = read_stat(static_cast<pid_t>(std::stol(name)))) found.push_back(*stat);
  }
  return found;
}

}  // namespace

const std::string& current_boot_id() {
  static const std::string id = [] {
    const char* file = "/proc/sys/kernel/random/boot_id";
    std::ifstream in(file);
    std::string text;
    if (!std::getline(in, text) || text.empty())
      throw std::runtime_error(std::string(file) +
                               ": cannot read this boot's id, which tells the run's processes "
                               "from later ones with the same pids");
    return text;
  }();
  return id;
}

std::optional<ProcessIdentity> read_identity(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  const auto stat = read_stat(pid);
  if (!stat) return std::nullopt;
  return ProcessIdentity{pid, stat->start_time, current_boot_id()};
}

bool matches(const ProcessIdentity& recorded, const std::optional<ProcessIdentity>& now) {
  return now && recorded.pid > 0 && now->pid == recorded.pid &&
         now->start_time == recorded.start_time && !recorded.boot_id.empty() &&
         now->boot_id == recorded.boot_id;
}

std::string how_it_differs(const ProcessIdentity& recorded, const ProcessIdentity& now) {
  if (now.boot_id != recorded.boot_id)
    return "the recorded one ran in another boot (boot id " + recorded.boot_id + "; this boot is " +
           now.boot_id + ")";
  if (now.start_time != recorded.start_time)
    return "pid " + std::to_string(now.pid) + " started at clock tick " +
           std::to_string(now.start_time) + " after boot, the recorded one at tick " +
           std::to_string(recorded.start_time);
  return {};
}

bool signal_process(const ProcessIdentity& recorded, int signal) {
  // Raw syscalls, not glibc's pidfd_open/pidfd_send_signal: those are
  // GLIBC_2.36 symbols, and the agent, which is copied to nodes, otherwise
  // needs only 2.34 (Ubuntu 22.04 has 2.35). 2.36's <sys/pidfd.h> also
  // declares them without C linkage, so C++ could not link them as is.
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
  // The pidfd is taken first and the identity checked after: a pidfd keeps
  // naming the process it was opened for, so if the identity still matches,
  // the signal can only reach that process even if it ends meanwhile.
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, recorded.pid, 0));
  if (fd >= 0) {
    const bool sent = matches(recorded, read_identity(recorded.pid)) &&
                      ::syscall(SYS_pidfd_send_signal, fd, signal, nullptr, 0) == 0;
    ::close(fd);
    return sent;
  }
  // No such process; else an older kernel (ENOSYS) or no descriptor to
  // spare, and the check and the signal below have to do.
  if (errno == ESRCH) return false;
#endif
  return matches(recorded, read_identity(recorded.pid)) && ::kill(recorded.pid, signal) == 0;
}

ChildProcess spawn_in_new_group(const std::vector<std::string>& argv_in,
                                const std::map<std::string, std::string>& extra_env) {
  // fork and exec rather than posix_spawn, which cannot set PR_SET_PDEATHSIG
  // in the child. Everything the child needs is prepared here: between fork
  // and exec it makes system calls only (the parent has threads).
  auto argv = argv_in;
  auto env = merged_environment(extra_env);
  auto argv_pointers = pointers(argv);
  auto env_pointers = pointers(env);
  const pid_t parent = getpid();
  int out[2], err[2], exec_error[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(exec_error, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1], exec_error[0], exec_error[1]}) close(fd);
    check(e, ("cannot start " + argv[0]).c_str());
  }
  if (pid == 0) {
    // Dies with the thread that started it, and so with the supervisor: a
    // rank whose supervisor is gone has no one to spool or stop it. A parent
    // that ended before the prctl is seen as a different parent pid.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    setpgid(0, 0);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null_fd = open("/dev/null", O_RDONLY);
    int e = 0;
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
      e = errno;
    else
      execve(argv_pointers[0], argv_pointers.data(), env_pointers.data());
    if (e == 0) e = errno;
    if (write(exec_error[1], &e, sizeof e) < 0) _exit(127);
    _exit(127);
  }
  // Also here, so that no signal to the group can come before the child's own setpgid.
  setpgid(pid, pid);
  close(out[1]);
  close(err[1]);
  close(exec_error[1]);
  int child_errno = 0;
  ssize_t n = 0;
  do {
    n = read(exec_error[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close(exec_error[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    check(child_errno, ("cannot start " + argv[0]).c_str());
  }
  // Unreaped, so /proc has it even if it has ended already; its session is
  // this process's (setpgid keeps the session).
  const auto stat = read_stat(pid);
  if (!stat) {
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    throw std::runtime_error("cannot read /proc/" + std::to_string(pid) + "/stat of the new " +
                             argv[0]);
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return {pid, out[0], err[0], {{pid, stat->start_time, current_boot_id()}, stat->session}};
}

namespace {

// Called in a new session's first process. With autogroup scheduling (the
// default of desktop kernels) a session is a scheduling group of its own at
// nice 0 whatever its processes' nice values, and the CPU is shared between
// groups first: the ranks of an agent niced below the window (a window's
// local agent) competed with the window as equals, and its thread waited for
// a CPU longer than it ran. The group takes this process's niceness; false
// when the kernel refused it. Only system calls and no allocation: this runs
// between fork and exec.
bool give_this_sessions_group_our_niceness() {
  errno = 0;
  const int niceness = getpriority(PRIO_PROCESS, 0);
  if (errno != 0 || niceness <= 0 || niceness > 19) return true;
  const int fd = open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return true;  // a kernel without autogroups: nice values alone rule
  char text[2];
  size_t length = 0;
  if (niceness >= 10) text[length++] = char('0' + niceness / 10);
  text[length++] = char('0' + niceness % 10);
  // The kernel takes one such change a tenth of a second from processes
  // without CAP_SYS_ADMIN and answers EAGAIN to others meanwhile.
  bool given = false;
  for (int attempt = 0; attempt < 20 && !given; ++attempt) {
    given = write(fd, text, length) == ssize_t(length);
    if (given || errno != EAGAIN) break;
    const timespec wait{0, 50'000'000};
    nanosleep(&wait, nullptr);
  }
  close(fd);
  return given;
}

}  // namespace

void spawn_detached(const std::vector<std::string>& argv_in, const fs::path& log) {
  auto argv = argv_in;
  auto args = pointers(argv);
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    // Intermediate: a new session, then fork again so that the supervisor is
    // nobody's child here and no terminal or connection can reach it.
    setsid();
    const pid_t grandchild = fork();
    if (grandchild != 0) _exit(grandchild < 0 ? 1 : 0);
    const int null_fd = open("/dev/null", O_RDWR);
    // The log is the run's, its owner's alone: 0600 whatever the umask.
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd >= 0) fchmod(log_fd, 0600);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(log_fd >= 0 ? log_fd : null_fd, 2);
    // Here, in the session's lasting process, not in the intermediate one the
    // agent waits for: the kernel may make it wait up to a second.
    if (!give_this_sessions_group_our_niceness()) {
      static const char refused[] =
          "flotilla-agent: /proc/self/autogroup refused the agent's niceness; this run's "
          "session keeps nice 0\n";
      (void)!write(2, refused, sizeof refused - 1);
    }
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("cannot detach " + argv[0]);
}

namespace {

// The processes now running under a recorded group's id, told apart into the
// group's own and strangers.
//
// A process group has no identity of its own: its id is the pid of the
// process that made it (the rank), and the kernel gives that number to no new
// process while any process is still in the group or the leader is an
// unreaped zombie. Hence, with L the leader's pid and T its start:
//  - recorded in another boot: nothing of the group can be running.
//  - pid L is a process that started at another time: the number was given
//    out again, so the group had emptied first; whatever is in group L now
//    is someone else's.
//  - pid L is the leader itself (a zombie too): everything in group L is the
//    run's, since a process enters a group only by being forked in it or by
//    setpgid from inside its session. The group is signalled as a whole
//    (kill(-L)), which also reaches a process forked a moment ago. A
//    stranger could only be hit if, between the check and the signal, every
//    process of the group ended and the pid space wrapped all the way round
//    to a new process that made itself leader of a group L.
//  - no process L (the leader ended and was reaped): what is in group L is
//    the leader's descendants still in it, or, if the group emptied and the
//    number went to a process that made a group of its own and then ended
//    before its children, a stranger's. The run's own started no earlier
//    than the leader and in the session the rank was started in, whose id
//    the kernel keeps from reuse in the same way; a stranger passes both
//    only if both numbers were reused for it in this boot. These are
//    signalled one by one, each checked again against its own start.
struct GroupNow {
  bool leader_runs = false;  // the recorded leader itself, zombie or not
  std::vector<ProcStat> own;
  std::vector<ProcStat> strangers;
  std::string why_strangers;  // when there are strangers: how they were told apart
};

GroupNow look_at_group(const ProcessGroupRecord& group, const std::vector<ProcStat>& processes) {
  GroupNow now;
  const ProcessIdentity& leader = group.leader;
  if (leader.pid <= 1) return now;
  const auto leader_now = std::find_if(processes.begin(), processes.end(),
                                       [&](const ProcStat& p) { return p.pid == leader.pid; });
  std::string why;
  if (leader.boot_id != current_boot_id()) {
    why = "it was recorded in another boot (boot id " + leader.boot_id + "; this boot is " +
          current_boot_id() + ")";
  } else if (leader_now != processes.end() && leader_now->start_time != leader.start_time) {
    why = "its leader's pid " + std::to_string(leader.pid) + " is now another process (" +
          how_it_differs(leader, {leader.pid, leader_now->start_time, current_boot_id()}) + ")";
  } else {
    now.leader_runs = leader_now != processes.end();
  }
  for (const auto& p : processes) {
    if (p.pgrp != leader.pid || p.state == 'Z') continue;
    const bool own =
        why.empty() &&
        (now.leader_runs || (p.session == group.session && p.start_time >= leader.start_time));
    (own ? now.own : now.strangers).push_back(p);
  }
  if (!now.strangers.empty() && why.empty())
    why = "its rank has ended and these started before it or in another session";
  if (!now.strangers.empty()) now.why_strangers = why;
  return now;
}

}  // namespace

void signal_groups(const std::vector<ProcessGroupRecord>& groups, int signal) {
  const auto processes = all_processes();
  for (const auto& group : groups) {
    const auto now = look_at_group(group, processes);
    if (now.leader_runs) {
      if (matches(group.leader, read_identity(group.leader.pid))) ::kill(-group.leader.pid, signal);
      continue;
    }
    for (const auto& p : now.own)
      signal_process({p.pid, p.start_time, group.leader.boot_id}, signal);
  }
}

std::vector<pid_t> processes_in_groups(const std::vector<ProcessGroupRecord>& groups) {
  const auto processes = all_processes();
  std::vector<pid_t> found;
  for (const auto& group : groups)
    for (const auto& p : look_at_group(group, processes).own) found.push_back(p.pid);
  return found;
}

std::vector<pid_t> kill_groups(const std::vector<ProcessGroupRecord>& groups) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto left = processes_in_groups(groups);
  for (; !left.empty() && std::chrono::steady_clock::now() < give_up;
       left = processes_in_groups(groups)) {
    signal_groups(groups, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return left;
}

std::string survivors_words(const std::vector<pid_t>& left) {
  if (left.empty()) return {};
  return std::to_string(left.size()) + " process(es) of the run survive SIGKILL, first pid " +
         std::to_string(left.front());
}

std::string strangers_in_group(const ProcessGroupRecord& group) {
  const auto now = look_at_group(group, all_processes());
  if (now.strangers.empty()) return {};
  std::string pids;
  for (const auto& p : now.strangers) pids += (pids.empty() ? "" : ", ") + std::to_string(p.pid);
  return "process group " + std::to_string(group.leader.pid) + " is not this run's rank's, for " +
         now.why_strangers + ": nothing in it was signalled (pid " + pids + ")";
}

std::vector<pid_t> any_processes_in_groups(const std::vector<int>& pgids) {
  const std::set<int> wanted(pgids.begin(), pgids.end());
  std::vector<pid_t> found;
  for (const auto& p : all_processes())
    if (p.state != 'Z' && wanted.count(p.pgrp)) found.push_back(p.pid);
  return found;
}

bool process_running(pid_t pid) {
  const auto stat = read_stat(pid);
  return stat && stat->state != 'Z';
}

fs::path own_executable() {
  return fs::read_symlink("/proc/self/exe");
}

}  // namespace flotilla::agent
