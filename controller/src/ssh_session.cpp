#include "ssh_session.h"

#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "node_access.h"
#include "shell_quote.h"

namespace flotilla::controller {

struct SshSession::Impl {
  ssh_session session = nullptr;
  sftp_session sftp = nullptr;
  SshTarget target;
  ~Impl() {
    if (sftp) sftp_free(sftp);
    if (session) {
      ssh_disconnect(session);
      ssh_free(session);
    }
  }
  std::string where() const {
    return target.user + "@" + target.host + ":" + std::to_string(target.port);
  }
  std::string error() const { return ssh_get_error(session); }
};

namespace {

std::string fingerprint_of(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t length = 0;
  std::string text = "(unreadable host key)";
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length) == 0) {
    if (char* printable = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length)) {
      text = printable;
      ssh_string_free_char(printable);
    }
    ssh_clean_pubkey_hash(&hash);
  }
  return text;
}

std::string fingerprint_of(ssh_session session) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session, &key) != SSH_OK) return "(no host key)";
  std::string text = fingerprint_of(key);
  ssh_key_free(key);
  return text;
}

// The fingerprints of the keys `known_hosts` records for the host (named as
// libssh names it there: "[host]:port" off port 22), so that a person told
// of a changed key can compare the recorded one with the new one.
std::string recorded_fingerprints(const std::string& known_hosts, const SshTarget& target) {
  const std::string host =
      target.port == 22 ? target.host : "[" + target.host + "]:" + std::to_string(target.port);
  std::ifstream in(known_hosts);
  std::string found;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    ssh_knownhosts_entry* entry = nullptr;
    if (ssh_known_hosts_parse_line(host.c_str(), line.c_str(), &entry) == SSH_OK && entry)
      found += (found.empty() ? "" : ", ") + fingerprint_of(entry->publickey);
    SSH_KNOWNHOSTS_ENTRY_FREE(entry);
  }
  return found.empty() ? "unreadable" : found;
}

// A channel's end of a remote process as a Transport. Reads go in short
// slices so that the session's mutex is never held for long.
class SshChannelTransport final : public Transport {
 public:
  SshChannelTransport(std::shared_ptr<SshSession> owner, std::mutex& mutex, ssh_channel channel,
                      std::string description)
      : owner_(std::move(owner)),
        mutex_(mutex),
        channel_(channel),
        description_(std::move(description)) {}
  ~SshChannelTransport() override { close(); }

  using Clock = std::chrono::steady_clock;

  bool write(std::string_view bytes) override {
    std::lock_guard lock(mutex_);
    if (!channel_ || !ssh_channel_is_open(channel_)) return false;
    while (!bytes.empty()) {
      const int n = ssh_channel_write(channel_, bytes.data(), static_cast<uint32_t>(bytes.size()));
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  std::optional<std::string> read(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[16384];
    do {
      {
        std::lock_guard lock(mutex_);
        if (!channel_) return std::nullopt;
        const int n = ssh_channel_read_timeout(channel_, buffer, sizeof buffer, 0, 20);
        if (n > 0) {
          last_heard_ = Clock::now();
          return std::string(buffer, static_cast<size_t>(n));
        }
        if (n == SSH_ERROR || ssh_channel_is_eof(channel_) || !ssh_channel_is_open(channel_))
          return std::nullopt;
        // A quiet node: a message it must acknowledge, so that a path gone
        // silent leaves data unacknowledged and the socket's
        // TCP_USER_TIMEOUT ends the connection (see kUnreachableWithin).
        const auto now = Clock::now();
        if (now - std::max(last_heard_, last_keepalive_) >= kKeepaliveIdle) {
          last_keepalive_ = now;
          if (ssh_send_ignore(ssh_channel_get_session(channel_), "keepalive") != SSH_OK)
            return std::nullopt;
        }
      }
      // Let a writer in between slices.
      std::this_thread::yield();
    } while (std::chrono::steady_clock::now() < deadline);
    return std::string();
  }

  void close() override {
    std::lock_guard lock(mutex_);
    if (!channel_) return;
    ssh_channel_send_eof(channel_);
    ssh_channel_close(channel_);
    ssh_channel_free(channel_);
    channel_ = nullptr;
  }

  std::string describe() const override { return description_; }

 private:
  std::shared_ptr<SshSession> owner_;
  std::mutex& mutex_;
  ssh_channel channel_;
  std::string description_;
  Clock::time_point last_heard_ = Clock::now();
  Clock::time_point last_keepalive_ = Clock::now();
};

// TCP keepalive and TCP_USER_TIMEOUT on the session's socket: a silent path
// closes it within kKeepaliveIdle + kUnacknowledgedLimit (kUnreachableWithin).
void bound_silence(ssh_session session, const std::string& where) {
  const socket_t fd = ssh_get_fd(session);
  const int on = 1;
  const int idle_s = static_cast<int>(kKeepaliveIdle.count());
  const int interval_s = 1;
  // Without TCP_USER_TIMEOUT (not Linux) the probes alone end it in the same time.
  const int probes = static_cast<int>((kUnacknowledgedLimit - kKeepaliveIdle).count());
  const unsigned user_timeout_ms =
      static_cast<unsigned>(std::chrono::milliseconds(kUnacknowledgedLimit).count());
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms) != 0)
    throw std::runtime_error("cannot set TCP keepalive on the connection to " + where + ": " +
                             std::strerror(errno));
}

}  // namespace

bool tcp_port_answers(const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool answered = false;
  for (addrinfo* a = found; a && !answered; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      answered = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof error;
      answered = ::poll(&p, 1, static_cast<int>(timeout.count())) == 1 &&
                 getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
    ::close(fd);
  }
  freeaddrinfo(found);
  return answered;
}

std::shared_ptr<SshSession> SshSession::connect(const SshTarget& target) {
  static const int initialised = ssh_init();
  (void)initialised;
  std::shared_ptr<SshSession> self(new SshSession());
  self->impl_ = std::make_unique<Impl>();
  auto& impl = *self->impl_;
  impl.target = target;
  impl.session = ssh_new();
  if (!impl.session) throw std::runtime_error("cannot create an SSH session");
  const long timeout_s = std::max<long>(1, static_cast<long>(target.timeout.count() / 1000));
  const int port = target.port;
  const std::string known_hosts = target.known_hosts.string();
  ssh_options_set(impl.session, SSH_OPTIONS_HOST, target.host.c_str());
  ssh_options_set(impl.session, SSH_OPTIONS_PORT, &port);
  ssh_options_set(impl.session, SSH_OPTIONS_USER, target.user.c_str());
  ssh_options_set(impl.session, SSH_OPTIONS_TIMEOUT, &timeout_s);
  ssh_options_set(impl.session, SSH_OPTIONS_KNOWNHOSTS, known_hosts.c_str());
  // Only Flotilla's own known_hosts decides, not the system's.
  ssh_options_set(impl.session, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  // No ~/.ssh/config: a node is what the database says it is.
  int no = 0;
  ssh_options_set(impl.session, SSH_OPTIONS_PROCESS_CONFIG, &no);
  if (ssh_connect(impl.session) != SSH_OK)
    throw std::runtime_error("cannot connect to " + impl.where() + ": " + impl.error());
  bound_silence(impl.session, impl.where());

  self->fingerprint_ = fingerprint_of(impl.session);
  switch (ssh_session_is_known_server(impl.session)) {
    case SSH_KNOWN_HOSTS_OK:
      break;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      throw HostKeyError(HostKeyError::Kind::changed, self->fingerprint_,
                         "WARNING: the host key of " + impl.where() + " has CHANGED (now " +
                             self->fingerprint_ + ", recorded " +
                             recorded_fingerprints(known_hosts, target) +
                             ") and differs from the one in " + known_hosts +
                             ". Someone may be intercepting the connection, or the host was "
                             "reinstalled. Refused; if the change is expected, remove the old "
                             "key from that file.");
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      // A person confirmed one key: exactly that one is trusted. Another
      // one now means the key changed between showing and trusting.
      if (!target.confirmed_host_key.empty() && target.confirmed_host_key != self->fingerprint_)
        throw HostKeyError(HostKeyError::Kind::not_confirmed, self->fingerprint_,
                           "the host key of " + impl.where() + " is now " + self->fingerprint_ +
                               ", not " + target.confirmed_host_key +
                               " that was shown and confirmed. Refused and nothing recorded: "
                               "the key changed after it was shown (a reinstall, or someone "
                               "in between); check the node's key again.");
      if (target.confirmed_host_key.empty() && !target.trust_new_host_key)
        throw HostKeyError(HostKeyError::Kind::unknown, self->fingerprint_,
                           "the host key of " + impl.where() + " (" + self->fingerprint_ +
                               ") is not known; check it and trust exactly this key "
                               "(--trust-host-key NODE=" +
                               self->fingerprint_ + ") or any new key (--trust-new-host-key)");
      {
        // Written here rather than by ssh_session_update_known_hosts, which
        // creates the file with whatever mode the umask leaves.
        char* entry = nullptr;
        if (ssh_session_export_known_hosts_entry(impl.session, &entry) != SSH_OK)
          throw std::runtime_error("cannot record the host key of " + impl.where() + " in " +
                                   known_hosts + ": " + impl.error());
        const std::string line = entry;
        ssh_string_free_char(entry);
        record_known_host(target.known_hosts, line);
        break;
      }
    default:
      throw std::runtime_error("cannot check the host key of " + impl.where() + " against " +
                               known_hosts + ": " + impl.error());
  }

  if (!target.key_file.empty()) {
    ssh_key key = nullptr;
    if (ssh_pki_import_privkey_file(target.key_file.c_str(), nullptr, nullptr, nullptr, &key) !=
        SSH_OK)
      throw std::runtime_error("cannot read the private key " + target.key_file.string() +
                               " (a key with a passphrase needs ssh-agent)");
    const int result = ssh_userauth_publickey(impl.session, nullptr, key);
    ssh_key_free(key);
    if (result != SSH_AUTH_SUCCESS)
      throw std::runtime_error(impl.where() + " refused the key " + target.key_file.string());
  } else if (ssh_userauth_agent(impl.session, nullptr) != SSH_AUTH_SUCCESS) {
    throw std::runtime_error(impl.where() +
                             " accepted no key from ssh-agent (is SSH_AUTH_SOCK set and the key "
                             "added?)");
  }
  return self;
}

SshSession::~SshSession() = default;

std::string SshSession::describe() const {
  return impl_->where();
}

namespace {
// Hands each whole line of `out` after `said` to `on_line`.
void emit_lines(const std::function<void(const std::string&)>& on_line, const std::string& out,
                size_t& said) {
  if (!on_line) return;
  for (size_t end; (end = out.find('\n', said)) != std::string::npos; said = end + 1)
    on_line(out.substr(said, end - said));
}
}  // namespace

SshSession::Result SshSession::run(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout,
                                   const std::function<void(const std::string&)>& on_line) {
  const auto command = command_line(argv);
  std::unique_lock lock(mutex_);
  ssh_channel channel = ssh_channel_new(impl_->session);
  if (!channel || ssh_channel_open_session(channel) != SSH_OK ||
      ssh_channel_request_exec(channel, command.c_str()) != SSH_OK) {
    if (channel) ssh_channel_free(channel);
    throw std::runtime_error(impl_->where() + ": cannot run " + argv.front() + ": " +
                             impl_->error());
  }
  ssh_channel_send_eof(channel);
  Result result;
  size_t said = 0;  // how much of result.out went to on_line
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[16384];
  while (!ssh_channel_is_eof(channel)) {
    if (std::chrono::steady_clock::now() > deadline) {
      ssh_channel_close(channel);
      ssh_channel_free(channel);
      throw std::runtime_error(impl_->where() + ": " + argv.front() + " did not end within " +
                               std::to_string(timeout.count() / 1000) + " s");
    }
    for (int is_stderr : {0, 1}) {
      const int n = ssh_channel_read_timeout(channel, buffer, sizeof buffer, is_stderr, 20);
      if (n == SSH_ERROR) {
        ssh_channel_free(channel);
        throw std::runtime_error(impl_->where() + ": connection lost: " + impl_->error());
      }
      if (n > 0) (is_stderr ? result.err : result.out).append(buffer, static_cast<size_t>(n));
    }
    emit_lines(on_line, result.out, said);
  }
  // What is still buffered after EOF.
  for (int is_stderr : {0, 1})
    while (true) {
      const int n = ssh_channel_read_nonblocking(channel, buffer, sizeof buffer, is_stderr);
      if (n <= 0) break;
      (is_stderr ? result.err : result.out).append(buffer, static_cast<size_t>(n));
    }
  emit_lines(on_line, result.out, said);
  if (on_line && said < result.out.size()) on_line(result.out.substr(said));
  result.exit_status = ssh_channel_get_exit_status(channel);
  ssh_channel_close(channel);
  ssh_channel_free(channel);
  return result;
}

std::unique_ptr<Transport> SshSession::start(const std::vector<std::string>& argv) {
  const auto command = command_line(argv);
  std::lock_guard lock(mutex_);
  ssh_channel channel = ssh_channel_new(impl_->session);
  if (!channel || ssh_channel_open_session(channel) != SSH_OK ||
      ssh_channel_request_exec(channel, command.c_str()) != SSH_OK) {
    if (channel) ssh_channel_free(channel);
    throw std::runtime_error(impl_->where() + ": cannot start " + argv.front() + ": " +
                             impl_->error());
  }
  return std::make_unique<SshChannelTransport>(shared_from_this(), mutex_, channel,
                                               argv.front() + " on " + impl_->where());
}

namespace {
std::string sftp_problem(sftp_session sftp, ssh_session session) {
  return std::string(ssh_get_error(session)) + " (SFTP status " +
         std::to_string(sftp_get_error(sftp)) + ")";
}
}  // namespace

void SshSession::upload(const std::filesystem::path& local, const std::string& remote_path,
                        int mode) {
  std::ifstream in(local, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + local.string());
  upload_stream(in, remote_path, mode);
}

void SshSession::upload_contents(const std::string& contents, const std::string& remote_path,
                                 int mode) {
  std::istringstream in(contents);
  upload_stream(in, remote_path, mode);
}

void SshSession::upload_stream(std::istream& in, const std::string& remote_path, int mode) {
  std::lock_guard lock(mutex_);
  auto& impl = *impl_;
  if (!impl.sftp) {
    impl.sftp = sftp_new(impl.session);
    if (!impl.sftp || sftp_init(impl.sftp) != SSH_OK)
      throw std::runtime_error(impl.where() + ": no SFTP: " + impl.error());
  }
  // Written under a temporary name and renamed: a half-sent file never
  // carries the final name.
  const std::string partial = remote_path + ".part";
  sftp_file file = sftp_open(impl.sftp, partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!file)
    throw std::runtime_error(impl.where() + ": cannot write " + partial + ": " +
                             sftp_problem(impl.sftp, impl.session));
  std::vector<char> buffer(64 * 1024);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    if (sftp_write(file, buffer.data(), n) != static_cast<ssize_t>(n)) {
      sftp_close(file);
      throw std::runtime_error(impl.where() + ": writing " + partial +
                               " failed: " + sftp_problem(impl.sftp, impl.session));
    }
  }
  sftp_close(file);
  sftp_chmod(impl.sftp, partial.c_str(), static_cast<mode_t>(mode));
  sftp_unlink(impl.sftp, remote_path.c_str());  // SFTP v3 renames only onto nothing
  if (sftp_rename(impl.sftp, partial.c_str(), remote_path.c_str()) != SSH_OK)
    throw std::runtime_error(impl.where() + ": cannot rename " + partial + " to " + remote_path +
                             ": " + sftp_problem(impl.sftp, impl.session));
}

bool SshSession::exists(const std::string& remote_path) {
  std::lock_guard lock(mutex_);
  auto& impl = *impl_;
  if (!impl.sftp) {
    impl.sftp = sftp_new(impl.session);
    if (!impl.sftp || sftp_init(impl.sftp) != SSH_OK)
      throw std::runtime_error(impl.where() + ": no SFTP: " + impl.error());
  }
  sftp_attributes attributes = sftp_stat(impl.sftp, remote_path.c_str());
  if (!attributes) return false;
  sftp_attributes_free(attributes);
  return true;
}

void SshSession::make_directories(const std::string& remote_path) {
  std::string prefix = remote_path.rfind('/', 0) == 0 ? "/" : "";
  size_t start = 0;
  while (start < remote_path.size()) {
    size_t slash = remote_path.find('/', start);
    if (slash == std::string::npos) slash = remote_path.size();
    const std::string part = remote_path.substr(start, slash - start);
    start = slash + 1;
    if (part.empty() || part == ".") continue;
    prefix += (prefix.empty() || prefix.back() == '/') ? part : "/" + part;
    if (exists(prefix)) continue;
    std::lock_guard lock(mutex_);
    if (sftp_mkdir(impl_->sftp, prefix.c_str(), 0755) != SSH_OK &&
        sftp_get_error(impl_->sftp) != SSH_FX_FILE_ALREADY_EXISTS)
      throw std::runtime_error(impl_->where() + ": cannot create " + prefix + ": " +
                               sftp_problem(impl_->sftp, impl_->session));
  }
}

}  // namespace flotilla::controller
