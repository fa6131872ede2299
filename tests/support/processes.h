#pragma once
// Real processes for integration tests: start a program with its output in a
// file, wait for it with a limit, and read /proc without trusting anyone's word.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace flotilla::testing {

class ChildProcess {
 public:
  // Starts `argv` with `env` ("NAME=value") added, stdout and stderr into `output`.
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& output,
               const std::vector<std::string>& env = {});
  ~ChildProcess();  // SIGKILLs it if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The exit status, or nothing if it is still running after `limit`.
  std::optional<int> wait(std::chrono::milliseconds limit);
  void kill(int signal);
  std::string output() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::filesystem::path output_;
};

// Live (not zombie) processes whose command line contains every one of `parts`.
std::vector<pid_t> live_processes_with(const std::vector<std::string>& parts);
bool process_alive(pid_t pid);

}  // namespace flotilla::testing
