#pragma once
// One SSH connection to a node (libssh): public-key or ssh-agent login, the
// host key checked against a known_hosts file, commands, a long-running
// process as a Transport, and SFTP. Passwords are never asked for or stored.
// libssh sessions are not thread-safe: every call on one session, whichever
// channel it is for, holds the session's mutex.

#include <chrono>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "flotilla/controller/connect_options.h"
#include "transport.h"

namespace flotilla::controller {

// A path that drops packets without a reset (a switch gone silent, a
// firewall) shows no error by itself: TCP retransmits for about 15 minutes
// before it gives up. A node is to be marked unreachable within
// kUnreachableWithin instead (issue 15), so every node connection sends an
// SSH keepalive after kKeepaliveIdle without a byte from the node, and its
// socket gives up on data left unacknowledged for kUnacknowledgedLimit
// (TCP_USER_TIMEOUT; TCP keepalive probes cover a socket with nothing to
// send). A link closed so is then told apart from an agent that exited by
// a TCP connect to the node's SSH port, cut off after kPortCheckTimeout.
// The limits are far above a LAN's or a WAN's round trip: a slow link is not
// taken for a dead one.
inline constexpr std::chrono::seconds kUnreachableWithin{20};
inline constexpr std::chrono::seconds kKeepaliveIdle{3};
inline constexpr std::chrono::seconds kUnacknowledgedLimit{10};
inline constexpr std::chrono::seconds kPortCheckTimeout{1};
static_assert(kKeepaliveIdle + kUnacknowledgedLimit + kPortCheckTimeout < kUnreachableWithin,
              "a silent link must be noticed within kUnreachableWithin");

// True when a TCP connection to host:port is accepted within `timeout`
// (closed again at once): the path and the node's sshd are there.
bool tcp_port_answers(const std::string& host, int port, std::chrono::milliseconds timeout);

struct SshTarget {
  std::string host;
  int port = 22;
  std::string user;
  std::filesystem::path key_file;     // empty: ssh-agent (SSH_AUTH_SOCK)
  std::filesystem::path known_hosts;  // host keys are checked against and added to it
  bool trust_new_host_key = false;    // an unknown key is refused unless this is set
  // The fingerprint a person confirmed for this host: when set, an unknown
  // key is recorded only if it is this one, and refused otherwise.
  std::string confirmed_host_key;
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
  // `on_line`, when given, is called with each line of its stdout as it comes.
  Result run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
             const std::function<void(const std::string&)>& on_line = {});
  // A long-running remote process: its stdin and stdout as a Transport, which
  // keeps this session alive.
  std::unique_ptr<Transport> start(const std::vector<std::string>& argv);

  // SFTP. Paths are the node's: relative ones start at the login's home.
  void upload(const std::filesystem::path& local, const std::string& remote_path, int mode);
  // The same for bytes held in memory: nothing is written on this machine.
  void upload_contents(const std::string& contents, const std::string& remote_path, int mode);
  bool exists(const std::string& remote_path);
  void make_directories(const std::string& remote_path);

 private:
  SshSession() = default;
  void upload_stream(std::istream& in, const std::string& remote_path, int mode);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string fingerprint_;
  std::mutex mutex_;
};

}  // namespace flotilla::controller
