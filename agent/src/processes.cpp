#include "processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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
                                const std::map<std::string, std::string>& extra_env) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t defaults;
  sigfillset(&defaults);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  auto argv = argv_in;
  auto env = merged_environment(extra_env);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, pointers(argv).data(),
                             pointers(env).data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    check(rc, ("cannot start " + argv[0]).c_str());
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
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
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
