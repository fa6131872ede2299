// The test cluster itself (cluster.sh and TestCluster): real hosts as network
// namespaces, reached over real SSH, and gone again afterwards. Needs root;
// skips saying why without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "processes.h"
#include "temp_dir.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

#define SKIP_WITHOUT_CLUSTER()                              \
  do {                                                      \
    std::string why;                                        \
    if (!TestCluster::available(&why)) GTEST_SKIP() << why; \
  } while (false)

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::set<std::string> namespaces() {
  std::set<std::string> names;
  std::istringstream lines(run_command({"ip", "netns", "list"}).output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) names.insert(line.substr(0, line.find(' ')));
  return names;
}

bool has_namespace(const std::string& name) {
  return namespaces().count(name) > 0;
}

bool link_exists(const std::string& name) {
  return run_command({"ip", "link", "show", "dev", name}).status == 0;
}

std::string fingerprint(const std::string& public_key) {
  const auto result = run_command({"ssh-keygen", "-lf", public_key});
  EXPECT_EQ(result.status, 0) << result.output;
  std::istringstream words(result.output);
  std::string bits, hash;
  words >> bits >> hash;
  return hash;
}

// cluster.sh run directly, as a second test run on the machine would.
CommandResult cluster_sh(std::vector<std::string> args) {
  args.insert(args.begin(), cluster_script().string());
  return run_command(args);
}

// Whatever a test made by hand with cluster.sh goes when it ends, failed or not.
struct ForceDownAtEnd {
  fs::path dir;
  ~ForceDownAtEnd() { cluster_sh({"down", "--force", "--dir", dir.string()}); }
};

// The login cluster.sh writes into cluster.json: $FLOTILLA_CLUSTER_USER, else
// the unprivileged flotilla-test.
std::string expected_user() {
  const char* user = std::getenv("FLOTILLA_CLUSTER_USER");
  return user && *user ? user : "flotilla-test";
}

TEST(TestCluster, HostsAnswerOverSshWithTheirOwnAddressAndName) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ASSERT_EQ(cluster.hosts().size(), 3u);

  const auto j = nlohmann::json::parse(slurp(cluster.dir() / "cluster.json"));
  EXPECT_EQ(j.at("bridge"), "flbr0");
  EXPECT_EQ(j.at("key_file"), (cluster.dir() / "client_key").string());
  EXPECT_TRUE(fs::is_regular_file(cluster.key_file()));
  for (int i = 1; i <= 3; ++i) {
    const auto& h = cluster.hosts()[i - 1];
    SCOPED_TRACE(h.name);
    EXPECT_EQ(h.name, "flh" + std::to_string(i));
    EXPECT_EQ(h.netns, h.name);
    EXPECT_EQ(h.address, "10.77.0." + std::to_string(10 + i));
    EXPECT_EQ(h.port, 22);
    EXPECT_EQ(h.user, expected_user());
    // The tests' commands run as that login, root only when asked for, and
    // the node's folder for Flotilla is its own.
    EXPECT_EQ(cluster.ssh(h.name, "id -un"), expected_user() + "\n");
    EXPECT_EQ(cluster.ssh(h.name, "stat -c %U " + h.remote_dir), expected_user() + "\n");
    EXPECT_TRUE(fs::is_directory(h.remote_dir));
    EXPECT_TRUE(fs::is_regular_file(h.host_key_pub));

    // The address the host sees on itself is its own, and only that one
    // besides loopback: it is a different host from the machine.
    const auto addresses = cluster.ssh(h.name, "ip -o -4 addr show");
    EXPECT_NE(addresses.find("inet " + h.address + "/24"), std::string::npos) << addresses;
    EXPECT_EQ(addresses.find("inet 10.77.0.1/"), std::string::npos) << addresses;
    EXPECT_EQ(cluster.ssh(h.name, "hostname"), h.name + "\n");
    // The file system is the machine's: what a host writes under its remote
    // directory is there for the test to read.
    cluster.ssh(h.name, "echo from-" + h.name + " > " + h.remote_dir + "/hello");
    EXPECT_EQ(slurp(fs::path(h.remote_dir) / "hello"), "from-" + h.name + "\n");
  }
}

// Every host also takes the unprivileged login flotilla-test, with the
// client key and a home of its own per host, whichever user the tests use.
TEST(TestCluster, EveryHostTakesTheUnprivilegedTestUserWithAHomeOfItsOwn) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  for (const auto& h : cluster.hosts()) {
    SCOPED_TRACE(h.name);
    const auto result =
        run_command({"ssh",
                     "-F",
                     "/dev/null",
                     "-i",
                     cluster.key_file().string(),
                     "-o",
                     "IdentitiesOnly=yes",
                     "-o",
                     "IdentityAgent=none",
                     "-o",
                     "UserKnownHostsFile=" + cluster.known_hosts().string(),
                     "-o",
                     "StrictHostKeyChecking=yes",
                     "-o",
                     "BatchMode=yes",
                     "-l",
                     "flotilla-test",
                     h.address,
                     "--",
                     "id -un; id -u; echo $HOME; touch $HOME/mine && echo home-writable"});
    ASSERT_EQ(result.status, 0) << result.output;
    std::istringstream lines(result.output);
    std::string name, uid, home, writable;
    std::getline(lines, name);
    std::getline(lines, uid);
    std::getline(lines, home);
    std::getline(lines, writable);
    EXPECT_EQ(name, "flotilla-test");
    EXPECT_NE(uid, "0");
    EXPECT_EQ(home, (cluster.dir() / h.name / "user-home").string());
    EXPECT_EQ(writable, "home-writable");
  }
}

TEST(TestCluster, HostsReachEachOtherOverTheBridge) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  // The other host's sshd greets: a TCP connection from inside one host's
  // namespace to another's address, over the bridge.
  const auto banner_from = [&](const std::string& from, const std::string& to) {
    return cluster.ssh(
        from, "bash -c 'exec 3<>/dev/tcp/" + cluster.host(to).address + "/22 && head -c 7 <&3'");
  };
  EXPECT_EQ(banner_from("flh1", "flh2"), "SSH-2.0");
  EXPECT_EQ(banner_from("flh2", "flh3"), "SSH-2.0");
  EXPECT_EQ(banner_from("flh3", "flh1"), "SSH-2.0");
}

TEST(TestCluster, PidsOnSeesAProcessOnlyOnTheHostThatRunsIt) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  // Each host runs its sshd and nothing else yet.
  for (const auto& h : cluster.hosts()) {
    const auto processes = cluster.processes_on(h.name);
    ASSERT_EQ(processes.size(), 1u) << h.name;
    EXPECT_NE(processes[0].second.find("sshd"), std::string::npos) << processes[0].second;
  }
  const int pid =
      std::stoi(cluster.ssh("flh2", "nohup sleep 300 </dev/null >/dev/null 2>&1 & echo $!"));
  const auto on = [&](const std::string& host) {
    const auto pids = cluster.pids_on(host);
    return std::find(pids.begin(), pids.end(), pid) != pids.end();
  };
  EXPECT_TRUE(on("flh2"));
  EXPECT_FALSE(on("flh1"));
  EXPECT_FALSE(on("flh3"));
  cluster.ssh("flh2", "kill " + std::to_string(pid));
}

TEST(TestCluster, LinkDownMakesAHostUnreachableAndLinkUpRestoresIt) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ASSERT_EQ(cluster.ssh("flh2", "echo up"), "up\n");

  cluster.link("flh2", false);
  const auto cut = cluster.ssh_result("flh2", "echo up");
  EXPECT_EQ(cut.status, 255) << cut.output;  // ssh's own failure, not the command's
  EXPECT_EQ(cluster.ssh("flh1", "echo up"), "up\n");
  EXPECT_EQ(cluster.ssh("flh3", "echo up"), "up\n");

  cluster.link("flh2", true);
  // Carrier and the bridge port come back at once; the first try may still
  // meet a stale neighbour entry, so try until a generous deadline.
  CommandResult back;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  do {
    back = cluster.ssh_result("flh2", "echo up");
    if (back.status == 0) break;
    std::this_thread::sleep_for(200ms);
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(back.status, 0) << back.output;
  EXPECT_EQ(back.output, "up\n");
}

TEST(TestCluster, RekeyChangesTheFingerprintAndTheOldKeyIsRefused) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  const auto before = fingerprint(cluster.host("flh1").host_key_pub);
  const auto other = fingerprint(cluster.host("flh2").host_key_pub);
  TempDir temp;
  const auto old_known_hosts = temp.path() / "known_hosts";
  fs::copy_file(cluster.known_hosts(), old_known_hosts);

  cluster.rekey("flh1");
  EXPECT_NE(fingerprint(cluster.host("flh1").host_key_pub), before);
  EXPECT_EQ(fingerprint(cluster.host("flh2").host_key_pub), other);

  // A client that knew the old key refuses the host; one told the new key
  // (the fixture's known_hosts follows rekey) logs in.
  const auto refused = cluster.ssh_result("flh1", "echo in", old_known_hosts);
  EXPECT_EQ(refused.status, 255);
  EXPECT_NE(refused.output.find("REMOTE HOST IDENTIFICATION HAS CHANGED"), std::string::npos)
      << refused.output;
  EXPECT_EQ(cluster.ssh("flh1", "echo in"), "in\n");
  EXPECT_EQ(cluster.ssh_result("flh2", "echo in", old_known_hosts).output, "in\n");
}

TEST(TestCluster, DestructorLeavesNoNamespaceBridgeVethSshdOrFolder) {
  SKIP_WITHOUT_CLUSTER();
  fs::path dir;
  std::vector<int> sshds;
  {
    TestCluster cluster(2);
    dir = cluster.dir();
    for (const auto& h : cluster.hosts())
      for (int pid : cluster.pids_on(h.name)) sshds.push_back(pid);
    ASSERT_EQ(sshds.size(), 2u);
    ASSERT_TRUE(link_exists("flbr0"));
  }
  EXPECT_FALSE(has_namespace("flh1"));
  EXPECT_FALSE(has_namespace("flh2"));
  EXPECT_FALSE(link_exists("flbr0"));
  EXPECT_FALSE(link_exists("flv1"));
  EXPECT_FALSE(link_exists("flv2"));
  for (int pid : sshds) EXPECT_FALSE(process_alive(pid)) << pid;
  EXPECT_TRUE(live_processes_with({dir.string()}).empty());
  EXPECT_FALSE(fs::exists(dir));
}

TEST(TestCluster, AClusterWhoseOwnerDiedIsTornDownByTheNextUp) {
  SKIP_WITHOUT_CLUSTER();
  TempDir temp;
  const fs::path stale_dir = "/tmp/flotilla-cluster-stale-" + std::to_string(::getpid());
  ForceDownAtEnd guard{stale_dir};
  // A test that crashed: its cluster is up, a process runs on a host, and
  // the process that owned it is gone.
  auto owner = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sleep", "600"},
                                              temp.path() / "owner.txt");
  const auto up =
      cluster_sh({"up", "2", "--dir", stale_dir.string(), "--owner", std::to_string(owner->pid())});
  ASSERT_EQ(up.status, 0) << up.output;
  const auto started = run_command(
      {"sh", "-c", "ip netns exec flh2 sleep 600 </dev/null >/dev/null 2>&1 & echo $!"});
  const int left_behind = std::stoi(started.output);
  ASSERT_TRUE(process_alive(left_behind));
  owner->kill(SIGKILL);
  owner->wait(10s);

  TestCluster cluster(1);
  EXPECT_FALSE(has_namespace("flh2"));
  EXPECT_FALSE(link_exists("flv2"));
  EXPECT_FALSE(process_alive(left_behind));
  EXPECT_FALSE(fs::exists(stale_dir));
  EXPECT_EQ(cluster.ssh("flh1", "echo fresh"), "fresh\n");
}

TEST(TestCluster, AClusterOfALiveOwnerIsWaitedForAndNotTornDown) {
  SKIP_WITHOUT_CLUSTER();
  TempDir temp;
  const fs::path dir = "/tmp/flotilla-cluster-owned-" + std::to_string(::getpid());
  ForceDownAtEnd guard{dir};
  ChildProcess owner({"/bin/sleep", "600"}, temp.path() / "owner.txt");
  const auto up =
      cluster_sh({"up", "1", "--dir", dir.string(), "--owner", std::to_string(owner.pid())});
  ASSERT_EQ(up.status, 0) << up.output;
  const auto sshd = cluster_sh({"pids", "flh1"});
  ASSERT_EQ(sshd.status, 0) << sshd.output;

  // Another test run's `up` waits for the owner and gives up (75), its
  // `down` declines: the owner's hosts stay as they were.
  const auto second = cluster_sh({"up", "1", "--wait", "1"});
  EXPECT_EQ(second.status, 75) << second.output;
  EXPECT_NE(second.output.find("belongs to pid " + std::to_string(owner.pid())), std::string::npos)
      << second.output;
  const auto declined = cluster_sh({"down"});
  EXPECT_EQ(declined.status, 0) << declined.output;
  EXPECT_NE(declined.output.find("not torn down"), std::string::npos) << declined.output;
  EXPECT_TRUE(has_namespace("flh1"));
  EXPECT_TRUE(fs::exists(dir / "cluster.json"));
  EXPECT_EQ(cluster_sh({"pids", "flh1"}).output, sshd.output);

  // Once the owner is gone, anyone may take it down.
  owner.kill(SIGKILL);
  owner.wait(10s);
  const auto down = cluster_sh({"down"});
  EXPECT_EQ(down.status, 0) << down.output;
  EXPECT_FALSE(has_namespace("flh1"));
  EXPECT_FALSE(fs::exists(dir));
}

TEST(TestCluster, DownWithNothingThereSucceeds) {
  SKIP_WITHOUT_CLUSTER();
  const auto first = cluster_sh({"down"});
  EXPECT_EQ(first.status, 0) << first.output;
  const auto second = cluster_sh({"down-all"});
  EXPECT_EQ(second.status, 0) << second.output;
}

TEST(TestCluster, WithoutRootTheScriptSaysSoAndExitsWithTheSkipCode) {
  // As root, the script runs as nobody; otherwise as whoever runs the test.
  std::vector<std::string> argv;
  if (::geteuid() == 0) argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  argv.push_back(cluster_script().string());
  argv.insert(argv.end(), {"up", "1"});
  const auto result = run_command(argv);
  EXPECT_EQ(result.status, 77) << result.output;
  EXPECT_NE(result.output.find("needs root"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace flotilla::testing
