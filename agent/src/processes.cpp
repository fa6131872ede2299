#include "processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>

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

}  // namespace

ChildProcess spawn_in_new_group(const std::vector<std::string>& argv_in,
                                const std::map<std::string, std::string>& extra_env,
                                int64_t data_limit_bytes) {
  // fork and exec rather than posix_spawn, which cannot set a resource limit
  // in the child. Everything the child needs is prepared here: between fork
  // and exec it makes system calls only (the parent has threads).
  auto argv = argv_in;
  auto env = merged_environment(extra_env);
  auto argv_pointers = pointers(argv);
  auto env_pointers = pointers(env);
  rlimit data_limit{};
  getrlimit(RLIMIT_DATA, &data_limit);
  if (data_limit_bytes > 0) {
    const auto wanted = static_cast<rlim_t>(data_limit_bytes);
    // Never above the hard limit this process has: that would need privileges.
    data_limit.rlim_cur = data_limit.rlim_max == RLIM_INFINITY
                              ? wanted
                              : std::min<rlim_t>(wanted, data_limit.rlim_max);
    data_limit.rlim_max = data_limit.rlim_cur;
  }
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
    setpgid(0, 0);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null_fd = open("/dev/null", O_RDONLY);
    int e = 0;
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0 ||
        (data_limit_bytes > 0 && setrlimit(RLIMIT_DATA, &data_limit) != 0))
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
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return {pid, out[0], err[0]};
}

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
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("cannot detach " + argv[0]);
}

void signal_groups(const std::vector<int>& pgids, int signal) {
  for (int pgid : pgids)
    if (pgid > 1) ::kill(-pgid, signal);
}

namespace {
// State and process group of a /proc/<pid>/stat line; false if it cannot be read.
bool read_stat(const fs::path& stat_file, char& state, int& pgrp) {
  std::ifstream stat(stat_file);
  std::string line;
  if (!std::getline(stat, line)) return false;
  // pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
  const auto close_paren = line.rfind(')');
  int ppid = 0;
  return close_paren != std::string::npos &&
         std::sscanf(line.c_str() + close_paren + 1, " %c %d %d", &state, &ppid, &pgrp) == 3;
}
}  // namespace

std::vector<pid_t> processes_in_groups(const std::vector<int>& pgids) {
  const std::set<int> wanted(pgids.begin(), pgids.end());
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    char state = 0;
    int pgrp = 0;
    if (read_stat(entry.path() / "stat", state, pgrp) && state != 'Z' && wanted.count(pgrp))
      found.push_back(std::stoi(name));
  }
  return found;
}

bool process_running(pid_t pid) {
  char state = 0;
  int pgrp = 0;
  return read_stat(fs::path("/proc") / std::to_string(pid) / "stat", state, pgrp) && state != 'Z';
}

fs::path own_executable() {
  return fs::read_symlink("/proc/self/exe");
}

}  // namespace flotilla::agent
