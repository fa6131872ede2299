// The local node: flotilla-agent as a child process on two pipes. Plain
// POSIX rather than QProcess: the link reads on its own thread and writes from
// others, and a QProcess may only be used from the thread that created it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "transport.h"

extern char** environ;

namespace flotilla::controller {
namespace {

class LocalTransport final : public Transport {
 public:
  LocalTransport(const std::filesystem::path& program, int niceness) {
    // An agent that dies must show up as a failed write, not kill the controller.
    ::signal(SIGPIPE, SIG_IGN);
    if (::access(program.c_str(), X_OK) != 0)
      throw std::runtime_error("local node: the agent program " + program.string() +
                               " is missing or not executable");
    int to_agent[2], from_agent[2];
    if (::pipe2(to_agent, O_CLOEXEC) != 0 || ::pipe2(from_agent, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("local node: pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_agent[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_agent[1], 1);
    const std::string path = program.string();
    char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
    const int rc = ::posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(to_agent[0]);
    ::close(from_agent[1]);
    if (rc != 0) {
      ::close(to_agent[1]);
      ::close(from_agent[0]);
      throw std::runtime_error("local node: cannot start " + path + ": " + std::strerror(rc));
    }
    to_agent_ = to_agent[1];
    from_agent_ = from_agent[0];
    // Before the agent is told to start any rank: the ranks it forks inherit
    // its priority. A priority that cannot be lowered leaves the run as it is.
    // Relative to the program's main thread, also for 0: on Linux a nice
    // value is a thread's, and the agent started at that of the thread
    // starting it, which may run niced itself (the window's controller worker
    // does; an unprivileged process cannot take such a niceness back).
    if (niceness >= 0) {
      errno = 0;
      const int own = ::getpriority(PRIO_PROCESS, id_t(::getpid()));
      if (errno == 0) (void)::setpriority(PRIO_PROCESS, id_t(pid_), std::min(19, own + niceness));
    }
  }

  ~LocalTransport() override {
    close();
    if (pid_ > 0) {
      // Closing stdin ends the agent; a stuck one is not waited for forever.
      for (int i = 0; i < 200 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i) ::usleep(10000);
      if (::waitpid(pid_, nullptr, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
    if (from_agent_ >= 0) ::close(from_agent_);
  }

  bool write(std::string_view bytes) override {
    std::lock_guard lock(write_mutex_);
    while (!bytes.empty()) {
      if (to_agent_ < 0) return false;
      const ssize_t n = ::write(to_agent_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  std::optional<std::string> read(std::chrono::milliseconds timeout) override {
    pollfd fd{from_agent_, POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(timeout.count()));
    if (ready < 0) return errno == EINTR ? std::optional<std::string>("") : std::nullopt;
    if (ready == 0) return std::string();
    char buffer[1 << 16];
    const ssize_t n = ::read(from_agent_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) return std::string();
    if (n <= 0) return std::nullopt;
    return std::string(buffer, static_cast<size_t>(n));
  }

  void close() override {
    std::lock_guard lock(write_mutex_);
    if (to_agent_ >= 0) ::close(to_agent_);
    to_agent_ = -1;
  }

  std::string describe() const override { return "local agent (pid " + std::to_string(pid_) + ")"; }

 private:
  pid_t pid_ = -1;
  int to_agent_ = -1, from_agent_ = -1;
  std::mutex write_mutex_;
};

}  // namespace

std::unique_ptr<Transport> start_local_agent(const std::filesystem::path& agent_binary,
                                             int niceness) {
  return std::make_unique<LocalTransport>(agent_binary, niceness);
}

}  // namespace flotilla::controller
