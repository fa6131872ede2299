#pragma once
// An sshd on 127.0.0.1 of a test's own (OpenSSH's, started in the
// foreground), which can be restarted on the same port with another host
// key: a reinstalled node, or someone in between. Logins with client_key()
// as login(), root when the test runs as root.
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ports.h"
#include "processes.h"

namespace flotilla::testing {

class LocalSshd {
 public:
  static constexpr const char* kSshd = "/usr/sbin/sshd";

  // Makes host keys 1 and 2 and a client key in `dir`; starts nothing.
  explicit LocalSshd(const std::filesystem::path& dir) : dir_(dir), port_(free_tcp_port()) {
    for (const auto* name : {"host_key_1", "host_key_2", "client_key"})
      shell("ssh-keygen -q -t ed25519 -N '' -C flotilla-test -f " + (dir_ / name).string());
  }
  ~LocalSshd() { stop(); }
  LocalSshd(const LocalSshd&) = delete;
  LocalSshd& operator=(const LocalSshd&) = delete;

  // Whether sshd can run here at all; `why` says what is missing.
  static bool available(std::string* why) {
    if (::access(kSshd, X_OK) != 0 || shell("command -v ssh-keygen").empty()) {
      *why = std::string(kSshd) + " or ssh-keygen is not installed";
      return false;
    }
    // As root, sshd wants its privilege separation directory.
    if (::geteuid() == 0) std::filesystem::create_directories("/run/sshd");
    return true;
  }

  // Starts (or restarts) sshd presenting host key 1 or 2; true once it
  // listens (it says so on its log), false with the reason in log().
  bool start(int host_key) {
    stop();
    const auto config = dir_ / "sshd_config";
    std::ofstream(config) << "Port " << port_ << "\nListenAddress 127.0.0.1\n"
                          << "HostKey " << host_key_path(host_key).string() << "\n"
                          << "PidFile none\nAuthorizedKeysFile " << client_key() << ".pub\n"
                          << "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n";
    sshd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kSshd, "-D", "-e", "-f", config.string()},
        dir_ / ("sshd-" + std::to_string(++starts_) + ".log"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (sshd_->output().find("Server listening on") != std::string::npos) return true;
      if (sshd_->wait(std::chrono::milliseconds(20))) return false;  // it exited
    }
    return false;
  }
  void stop() {
    if (!sshd_) return;
    sshd_->kill(SIGTERM);
    sshd_->wait(std::chrono::seconds(10));
    sshd_.reset();
  }
  std::string log() const { return sshd_ ? sshd_->output() : std::string(); }

  int port() const { return port_; }
  std::string client_key() const { return (dir_ / "client_key").string(); }
  static std::string login() {
    if (::geteuid() == 0) return "root";
    const passwd* pw = ::getpwuid(::geteuid());
    return pw ? pw->pw_name : "";
  }
  std::filesystem::path host_key_path(int n) const {
    return dir_ / ("host_key_" + std::to_string(n));
  }
  // "SHA256:...", as ssh-keygen -l and libssh write it.
  std::string fingerprint(int host_key) const {
    return shell("ssh-keygen -lf " + host_key_path(host_key).string() + ".pub | awk '{print $2}'");
  }

 private:
  static std::string shell(const std::string& command) {
    std::string out;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return out;
    char buffer[512];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    ::pclose(pipe);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }

  std::filesystem::path dir_;
  int port_;
  int starts_ = 0;
  std::unique_ptr<ChildProcess> sshd_;
};

}  // namespace flotilla::testing
