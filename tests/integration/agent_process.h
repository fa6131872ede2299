#pragma once
// flotilla-agent as a real process on pipes for tests: the controller's side
// of the wire (send, read the next message, read until one), a run's start
// request, and what /proc says is left of its process groups.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace flotilla::testing {

using AgentClock = std::chrono::steady_clock;

class AgentProcess {
 public:
  // `niceness`: the agent runs at that nice value, as a window's local agent does.
  AgentProcess(const std::filesystem::path& home, const std::vector<std::string>& env = {},
               const std::string& train_binary = "", int niceness = 0) {
    int in[2], out[2];
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
      if (niceness != 0 && setpriority(PRIO_PROCESS, 0, niceness) != 0) _exit(126);
      if (train_binary.empty())
        execl(FLOTILLA_AGENT_BINARY, FLOTILLA_AGENT_BINARY, "--home", home.c_str(), nullptr);
      else
        execl(FLOTILLA_AGENT_BINARY, FLOTILLA_AGENT_BINARY, "--home", home.c_str(),
              "--train-binary", train_binary.c_str(), nullptr);
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_agent_ = in[1];
    from_agent_ = out[0];
  }
  ~AgentProcess() {
    close_input();
    close(from_agent_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void send_raw(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = write(to_agent_, bytes.data() + done, bytes.size() - done);
      ASSERT_GT(n, 0);
      done += static_cast<size_t>(n);
    }
  }
  void send(const nlohmann::json& message) { send_raw(message.dump() + "\n"); }
  void hello() {
    send({{"v", 1}, {"type", "hello"}, {"role", "controller"}, {"software", "test"}});
    auto reply = next(std::chrono::seconds(10));
    ASSERT_TRUE(reply);
    ASSERT_EQ((*reply)["type"], "hello") << *reply;
  }
  void close_input() {
    if (to_agent_ >= 0) close(to_agent_);
    to_agent_ = -1;
  }
  // The next message, or nothing after `timeout`.
  std::optional<nlohmann::json> next(std::chrono::milliseconds timeout) {
    const auto deadline = AgentClock::now() + timeout;
    for (;;) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        auto line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return nlohmann::json::parse(line);
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - AgentClock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd fd{from_agent_, POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[65536];
      const ssize_t n = read(from_agent_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }
  // Messages until `stop` holds for one (included), or the timeout.
  std::vector<nlohmann::json> until(const std::function<bool(const nlohmann::json&)>& stop,
                                    std::chrono::seconds timeout) {
    std::vector<nlohmann::json> out;
    const auto deadline = AgentClock::now() + timeout;
    while (AgentClock::now() < deadline) {
      auto m =
          next(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - AgentClock::now()));
      if (!m) break;
      out.push_back(*m);
      if (stop(*m)) break;
    }
    return out;
  }
  int wait_exit() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int to_agent_ = -1, from_agent_ = -1;
  std::string buffer_;
};

inline nlohmann::json start_message(const std::string& run, int64_t steps, int port) {
  nlohmann::json config = {{"name", run},
                           {"model", "small_cnn"},
                           {"dataset", "synthetic"},
                           {"synthetic",
                            {{"shape", {1, 28, 28}},
                             {"classes", 10},
                             {"train_samples", 64 * steps},
                             {"test_samples", 64}}},
                           {"strategy", "ddp"},
                           {"ranks_per_node", 2},
                           {"batch_size", 32},
                           {"epochs", 1},
                           {"threads", 1}};
  return {{"v", 1},
          {"type", "start"},
          {"run", run},
          {"config", config},
          {"ranks", {0, 1}},
          {"world_size", 2},
          {"master_addr", "127.0.0.1"},
          {"master_port", port}};
}

inline bool is_end(const nlohmann::json& m) {
  return m["type"] == "run_end";
}

inline std::vector<int> pgids_of(const std::vector<nlohmann::json>& messages) {
  for (const auto& m : messages)
    if (m["type"] == "started") return m["pids"].get<std::vector<int>>();
  return {};
}

// Processes of those groups still alive, read from /proc (zombies excluded).
inline std::vector<int> alive_in(const std::vector<int>& pgids) {
  std::vector<int> alive;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (!std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    std::sscanf(line.c_str() + line.rfind(')') + 1, " %c %d %d", &state, &ppid, &pgrp);
    for (int g : pgids)
      if (state != 'Z' && pgrp == g) alive.push_back(std::stoi(name));
  }
  return alive;
}

// The pid the run directory's supervisor.pid names: {"pid": ...} as the
// agent writes it, or the bare number agents before process identities wrote.
inline int supervisor_pid_in(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / "supervisor.pid");
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_number_integer()) return j.get<int>();
  if (j.is_object() && j.contains("pid") && j["pid"].is_number_integer()) return j["pid"];
  return 0;
}

// Field 22 of /proc/PID/stat: when it started, in clock ticks after boot.
inline uint64_t start_time_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  std::istringstream fields(line.substr(line.rfind(')') + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
  }
  return std::stoull(field);
}

inline std::string this_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Alive and not a zombie, as /proc says.
inline bool running(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  return std::getline(stat, line) && line[line.rfind(')') + 2] != 'Z';
}

// A `sleep` that is no process of any run, the leader of a process group of
// its own: what a stale or forged pid file may name. SIGKILLed (its group)
// and reaped at scope end, whatever the test did meanwhile.
class Stranger {
 public:
  Stranger() {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      execlp("sleep", "sleep", "600", static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid_, pid_);  // also here: in its group before the test names it
  }
  ~Stranger() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Stranger(const Stranger&) = delete;
  Stranger& operator=(const Stranger&) = delete;
  int pid() const { return pid_; }
  bool running() const { return testing::running(pid_); }

 private:
  pid_t pid_ = -1;
};

inline void expect_contiguous(const std::vector<nlohmann::json>& messages, int64_t first) {
  int64_t expected = first;
  for (const auto& m : messages) {
    if (m["type"] != "record" && m["type"] != "run_end") continue;
    EXPECT_EQ(m["seq"], expected) << m;
    expected = m["seq"].get<int64_t>() + 1;
  }
}

}  // namespace flotilla::testing
