#pragma once
// One controller connection: the protocol on a pair of file descriptors (the
// SSH channel's stdio, or a local pipe). It starts supervisors, forwards
// stop and status requests, and streams spools. Closing it leaves runs going.

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "flotilla/protocol/messages.h"

namespace flotilla::agent {

struct SessionOptions {
  std::filesystem::path home;
  std::filesystem::path train_binary;
  std::string software = "flotilla-agent";
};

class Session {
 public:
  Session(SessionOptions options, int in_fd, int out_fd);
  ~Session();
  // Serves until the input ends or a protocol version mismatch; returns the exit code.
  int serve();
  int64_t malformed_lines() const { return malformed_; }

 private:
  void handle_line(std::string_view line);
  void handle(const protocol::Message& message);
  void start(const protocol::StartRun& start);
  void stop(const protocol::StopRun& stop);
  void status(const protocol::StatusRequest& request);
  // Streams the run's spool after `after_seq` until its run_end, replacing an
  // earlier stream of the same run. kOnlyTheEnd: just the run_end.
  static constexpr int64_t kOnlyTheEnd = INT64_MAX;
  void follow(const std::string& run, int64_t after_seq);
  // A stop for a run whose supervisor died: end the ranks and the run here.
  // Stops what is left of a run whose supervisor is gone and writes its end:
  // `outcome_if_clean` when nothing survives, else failed.
  void end_orphaned_run(const std::string& run, const std::string& outcome_if_clean = "killed");
  void send(const protocol::Message& message);
  void send_line(const std::string& line);
  void report_malformed(const std::string& reason);

  SessionOptions options_;
  int in_fd_, out_fd_;
  std::mutex out_mutex_;
  bool greeted_ = false;
  bool done_ = false;
  int exit_code_ = 0;
  int64_t line_number_ = 0;
  std::atomic<int64_t> malformed_{0};
  std::atomic<bool> closing_{false};
  struct Follower {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> cancelled;
  };
  std::map<std::string, Follower> followers_;  // one spool stream per run
};

}  // namespace flotilla::agent
