// Trusting a host key is tied to the key a person was shown: a node whose
// key is swapped between the question (unknown_host_keys) and the answer
// (trust_host_key) is refused, naming both keys, and nothing is recorded.
// Against a real sshd on 127.0.0.1 that this test starts and restarts with
// another host key.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"
#include "local_sshd.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using namespace std::chrono_literals;
using testing::LocalSshd;
using testing::TempDir;

NodeRow node_of(const LocalSshd& sshd, const std::filesystem::path& dir) {
  NodeRow n;
  n.name = "keyed";
  n.host = "127.0.0.1";
  n.port = sshd.port();
  n.user = LocalSshd::login();
  n.key_file = sshd.client_key();
  n.remote_dir = (dir / "remote").string();
  return n;
}

// A controller whose known_hosts is the test's own (empty at first).
ControllerOptions options_in(const std::filesystem::path& dir) {
  ControllerOptions options;
  options.connect.known_hosts = dir / "known_hosts";
  options.connect.timeout = 10s;
  return options;
}

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
  store.add_node(node_of(sshd, dir.path()));
  Controller controller(store, options_in(dir.path()));

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

size_t logins_in(const std::string& sshd_log) {
  size_t n = 0;
  for (auto at = sshd_log.find("Accepted publickey"); at != std::string::npos;
       at = sshd_log.find("Accepted publickey", at + 1))
    ++n;
  return n;
}

// The connection that settled the key is the one the agent is started over,
// and a node with a live link is not connected to again to be checked.
TEST(HostKeyTrust, TheLinkAfterTheCheckIsMadeOverTheConnectionThatCheckedTheKey) {
  std::string why;
  if (!LocalSshd::available(&why)) GTEST_SKIP() << why;
  TempDir dir;
  LocalSshd sshd(dir.path());
  ASSERT_TRUE(sshd.start(1)) << sshd.log();
  Store store(QString::fromStdString((dir.path() / "flotilla.db").string()));
  auto node = node_of(sshd, dir.path());
  node.agent_path = FLOTILLA_AGENT_BINARY;
  store.add_node(node);
  Controller controller(store, options_in(dir.path()));

  const auto unknown = controller.unknown_host_keys({"keyed"});
  ASSERT_EQ(unknown.size(), 1u);
  controller.trust_host_key("keyed", unknown.front().fingerprint);
  EXPECT_EQ(logins_in(sshd.log()), 1u) << sshd.log();
  EXPECT_GT(controller.probe("keyed").free_port, 0);
  EXPECT_TRUE(controller.unknown_host_keys({"keyed"}).empty());
  EXPECT_EQ(logins_in(sshd.log()), 1u) << sshd.log();
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
