#pragma once
// One SSH connection to a node (libssh): public-key or ssh-agent login, the
// host key checked against a known_hosts file, commands, a long-running
// process as a Transport, and SFTP. Passwords are never asked for or stored.
// libssh sessions are not thread-safe: every call on one session, whichever
// channel it is for, holds the session's mutex.

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "flotilla/controller/connect_options.h"
#include "transport.h"

namespace flotilla::controller {

struct SshTarget {
  std::string host;
  int port = 22;
  std::string user;
  std::filesystem::path key_file;     // empty: ssh-agent (SSH_AUTH_SOCK)
  std::filesystem::path known_hosts;  // host keys are checked against and added to it
  bool trust_new_host_key = false;    // an unknown key is refused unless this is set
  std::chrono::milliseconds timeout{15000};
};

class SshSession : public std::enable_shared_from_this<SshSession> {
 public:
  // Throws HostKeyError, or std::runtime_error naming user@host:port and what failed.
  static std::shared_ptr<SshSession> connect(const SshTarget& target);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  const std::string& host_key_fingerprint() const { return fingerprint_; }
  std::string describe() const;

  struct Result {
    int exit_status = -1;
    std::string out, err;
  };
  // Runs `argv` (each word quoted) and waits for it; throws on a broken connection or timeout.
  Result run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);
  // A long-running remote process: its stdin and stdout as a Transport, which
  // keeps this session alive.
  std::unique_ptr<Transport> start(const std::vector<std::string>& argv);

  // SFTP. Paths are the node's: relative ones start at the login's home.
  void upload(const std::filesystem::path& local, const std::string& remote_path, int mode);
  bool exists(const std::string& remote_path);
  void make_directories(const std::string& remote_path);

 private:
  SshSession() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string fingerprint_;
  std::mutex mutex_;
};

}  // namespace flotilla::controller
