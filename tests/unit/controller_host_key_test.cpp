// Trusting a host key is tied to the key a person was shown: a node whose
// key is swapped between the question (unknown_host_keys) and the answer
// (trust_host_key) is refused, naming both keys, and nothing is recorded.
// Against a real sshd on 127.0.0.1 that this test starts and restarts with
// another host key.
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"
#include "ports.h"
#include "processes.h"
#include "ssh_session.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::TempDir;

constexpr const char* kSshd = "/usr/sbin/sshd";

std::string run_shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[512];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string login() {
  if (::geteuid() == 0) return "root";
  const passwd* pw = ::getpwuid(::geteuid());
  return pw ? pw->pw_name : "";
}

// One sshd on 127.0.0.1 of this test's own, which can be restarted on the
// same port with another host key: a reinstalled node, or someone in between.
class LocalSshd {
 public:
  explicit LocalSshd(const std::filesystem::path& dir)
      : dir_(dir), port_(testing::free_tcp_port()) {
    for (const auto* name : {"host_key_1", "host_key_2", "client_key"})
      run_shell("ssh-keygen -q -t ed25519 -N '' -C flotilla-test -f " + (dir_ / name).string());
  }
  ~LocalSshd() { stop(); }

  // Whether sshd can run here at all; `why` says what is missing.
  static bool available(std::string* why) {
    if (::access(kSshd, X_OK) != 0 || run_shell("command -v ssh-keygen").empty()) {
      *why = std::string(kSshd) + " or ssh-keygen is not installed";
      return false;
    }
    // As root, sshd wants its privilege separation directory.
    if (::geteuid() == 0) std::filesystem::create_directories("/run/sshd");
    return true;
  }

  // Starts (or restarts) sshd presenting host key 1 or 2; true once it answers.
  bool start(int host_key) {
    stop();
    const auto config = dir_ / "sshd_config";
    std::ofstream(config) << "Port " << port_ << "\nListenAddress 127.0.0.1\n"
                          << "HostKey " << host_key_path(host_key).string() << "\n"
                          << "PidFile none\nAuthorizedKeysFile "
                          << (dir_ / "client_key.pub").string()
                          << "\nPermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n";
    sshd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kSshd, "-D", "-e", "-f", config.string()}, dir_ / "sshd.log");
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (tcp_port_answers("127.0.0.1", port_, 200ms)) return true;
      if (sshd_->wait(0ms)) return false;  // it exited: its log says why
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  void stop() {
    if (!sshd_) return;
    sshd_->kill(SIGTERM);
    sshd_->wait(10s);
    sshd_.reset();
  }
  std::string log() const { return sshd_ ? sshd_->output() : std::string(); }

  std::filesystem::path host_key_path(int n) const {
    return dir_ / ("host_key_" + std::to_string(n));
  }
  std::string fingerprint(int host_key) const {
    return run_shell("ssh-keygen -lf " + host_key_path(host_key).string() +
                     ".pub | awk '{print $2}'");
  }
  NodeRow node() const {
    NodeRow n;
    n.name = "keyed";
    n.host = "127.0.0.1";
    n.port = port_;
    n.user = login();
    n.key_file = (dir_ / "client_key").string();
    n.remote_dir = (dir_ / "remote").string();
    return n;
  }

 private:
  std::filesystem::path dir_;
  int port_;
  std::unique_ptr<ChildProcess> sshd_;
};

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(HostKeyTrust, AKeySwappedBetweenTheQuestionAndTheTrustIsRefusedNamingBothAndNotRecorded) {
  std::string why;
  if (!LocalSshd::available(&why)) GTEST_SKIP() << why;
  TempDir dir;
  LocalSshd sshd(dir.path());
  ASSERT_TRUE(sshd.start(1)) << sshd.log();
  const std::string shown = sshd.fingerprint(1), swapped = sshd.fingerprint(2);
  ASSERT_NE(shown.rfind("SHA256:", 0), std::string::npos) << shown;
  ASSERT_NE(shown, swapped);

  Store store(QString::fromStdString((dir.path() / "flotilla.db").string()));
  store.add_node(sshd.node());
  ControllerOptions options;
  options.connect.known_hosts = dir.path() / "known_hosts";
  options.connect.timeout = 10s;
  Controller controller(store, options);

  // The person is shown the key the node presents now...
  const auto unknown = controller.unknown_host_keys({"keyed"});
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown.front().fingerprint, shown);

  // ...and while they compare it, the node comes to present another.
  ASSERT_TRUE(sshd.start(2)) << sshd.log();
  try {
    controller.trust_host_key("keyed", shown);
    FAIL() << "a key other than the one confirmed was trusted";
  } catch (const HostKeyError& e) {
    EXPECT_EQ(e.kind(), HostKeyError::Kind::not_confirmed);
    EXPECT_EQ(e.fingerprint(), swapped);
    const std::string message = e.what();
    EXPECT_NE(message.find(shown), std::string::npos) << message;
    EXPECT_NE(message.find(swapped), std::string::npos) << message;
  }
  EXPECT_EQ(file_text(dir.path() / "known_hosts"), "") << "a key was recorded";
  // Still unknown, and asked about with the key it presents now.
  const auto again = controller.unknown_host_keys({"keyed"});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again.front().fingerprint, swapped);

  // Confirming the key it presents trusts exactly that one.
  controller.trust_host_key("keyed", swapped);
  EXPECT_TRUE(controller.unknown_host_keys({"keyed"}).empty());
  EXPECT_NE(file_text(dir.path() / "known_hosts"), "");
  // The first key is now a changed one: refused as ever.
  ASSERT_TRUE(sshd.start(1)) << sshd.log();
  try {
    controller.unknown_host_keys({"keyed"});
    FAIL() << "a changed key was accepted";
  } catch (const HostKeyError& e) {
    EXPECT_EQ(e.kind(), HostKeyError::Kind::changed);
  }
}

TEST(HostKeyTrust, TrustingNeedsTheFingerprintThatWasConfirmed) {
  TempDir dir;
  Store store(QString::fromStdString((dir.path() / "flotilla.db").string()));
  NodeRow n;
  n.name = "somewhere";
  n.host = "127.0.0.1";
  n.port = testing::free_tcp_port();
  store.add_node(n);
  Controller controller(store);
  try {
    controller.trust_host_key("somewhere", "");
    FAIL() << "trusted without a fingerprint";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("somewhere"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fingerprint"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flotilla::controller
