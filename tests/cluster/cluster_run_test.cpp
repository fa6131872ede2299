// Flotilla across real hosts: three network namespaces with their own sshd
// (cluster.sh), reached through the `flotilla` CLI over real SSH and real TCP.
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <QString>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cluster_control.h"
#include "flotilla/controller/store.h"
#include "processes.h"
#include "temp_dir.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;
using controller::RunState;
using controller::Store;
using nlohmann::json;

// Every node's records stored once, seq 1..N contiguous, the last its run_end.
void expect_complete_per_node(const Store& store, const std::string& run,
                              const std::vector<ClusterHost>& hosts) {
  std::map<std::string, std::vector<controller::RecordRow>> by_node;
  for (auto& r : store.records(run)) by_node[r.node].push_back(r);
  ASSERT_EQ(by_node.size(), hosts.size());
  for (const auto& [node, records] : by_node) {
    for (size_t i = 0; i < records.size(); ++i)
      ASSERT_EQ(records[i].seq, static_cast<int64_t>(i + 1)) << node << " seq gap at " << i;
    EXPECT_EQ(records.back().type, "run_end") << node;
  }
}

std::vector<std::string> training_processes(const TestCluster& cluster, const std::string& host) {
  std::vector<std::string> left;
  for (const auto& [pid, cmdline] : cluster.processes_on(host))
    if (cmdline.find("flotilla-train") != std::string::npos ||
        cmdline.find("supervise") != std::string::npos)
      left.push_back(std::to_string(pid) + " " + cmdline);
  return left;
}

// Every process of the run (agent, supervisor, ranks) on every host runs as
// the hosts' login: with flotilla-test, the run shows that none needs root.
void expect_run_by_the_login(const TestCluster& cluster) {
  for (const auto& h : cluster.hosts()) {
    const passwd* login = ::getpwnam(h.user.c_str());
    ASSERT_NE(login, nullptr) << "no user " << h.user << " on this machine";
    size_t seen = 0;
    for (const auto& [pid, cmdline] : cluster.processes_on(h.name)) {
      // Not "flotilla-" alone: sshd's monitor for the login, root's by
      // design, is "sshd: flotilla-test [priv]".
      if (cmdline.find("flotilla-agent") == std::string::npos &&
          cmdline.find("flotilla-train") == std::string::npos)
        continue;
      struct stat owner {};
      if (::stat(("/proc/" + std::to_string(pid)).c_str(), &owner) != 0) continue;  // gone
      ++seen;
      EXPECT_EQ(owner.st_uid, login->pw_uid) << h.name << ": " << cmdline << " is not " << h.user;
    }
    EXPECT_GT(seen, 0u) << "no process of the run on " << h.name;
  }
}

// Fails the test unless no process of a run is left on any host within `limit`.
void expect_no_process_left_within(const TestCluster& cluster, std::chrono::seconds limit) {
  const auto began = std::chrono::steady_clock::now();
  const auto deadline = began + limit;
  std::map<std::string, std::vector<std::string>> left;
  do {
    left.clear();
    for (const auto& h : cluster.hosts())
      if (auto procs = training_processes(cluster, h.name); !procs.empty()) left[h.name] = procs;
    if (left.empty()) {
      // A figure for docs/faults.md, not asserted beyond the limit.
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
      std::cout << "no process of the run left on any host " << took.count()
                << " s after the CLI returned" << std::endl;
      break;
    }
    std::this_thread::sleep_for(200ms);
  } while (std::chrono::steady_clock::now() < deadline);
  for (const auto& [h, procs] : left)
    ADD_FAILURE() << h << " still runs " << procs.size() << " process(es) of the run, first "
                  << procs.front();
}

TEST(Cluster, ProbeRefusesUnknownHostKeysThenDeploysOnceAndDescribesEveryNode) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto [refused, refusal] = control.flotilla({"nodes", "probe"});
  EXPECT_EQ(refused, 1) << refusal;
  EXPECT_NE(refusal.find(
                "is not known; check it and trust exactly this key (--trust-host-key NODE=SHA256:"),
            std::string::npos)
      << refusal;
  EXPECT_FALSE(std::filesystem::exists(control.known_hosts()));

  const auto [first, deployed] = control.flotilla({"--trust-new-host-key", "nodes", "probe"});
  ASSERT_EQ(first, 0) << deployed;
  for (const auto& h : cluster.hosts())
    EXPECT_NE(deployed.find(h.name + ": "), std::string::npos) << deployed;
  EXPECT_NE(deployed.find("2 files"), std::string::npos) << deployed;

  const auto [second, again] = control.flotilla({"nodes", "probe"});
  ASSERT_EQ(second, 0) << again;
  size_t nothing = 0;
  for (size_t at = 0; (at = again.find("already there, nothing uploaded", at)) != std::string::npos;
       ++at)
    ++nothing;
  EXPECT_EQ(nothing, cluster.hosts().size()) << again;

  const auto store = control.store();
  for (const auto& h : cluster.hosts()) {
    const auto node = store.node(h.name);
    ASSERT_TRUE(node && node->probed_ms) << h.name;
    const auto probe = json::parse(node->probe_json);
    EXPECT_GT(probe["cpus"].get<int>(), 0);
    EXPECT_GT(probe["memory_bytes"].get<int64_t>(), 0);
    EXPECT_GT(probe["disk_free_bytes"].get<int64_t>(), 0);
  }
}

TEST(Cluster, ChangedHostKeyIsRefusedAndKnownHostsIsLeftAlone) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  ASSERT_EQ(control.flotilla({"--trust-new-host-key", "nodes", "probe", "flh2"}).first, 0);
  std::ifstream before_in(control.known_hosts());
  const std::string before((std::istreambuf_iterator<char>(before_in)), {});
  cluster.rekey("flh2");
  // Trusting new keys never extends to changed ones.
  const auto [status, output] =
      control.flotilla({"--trust-new-host-key", "nodes", "probe", "flh2"});
  EXPECT_EQ(status, 1);
  EXPECT_NE(output.find("has CHANGED"), std::string::npos) << output;
  std::ifstream after_in(control.known_hosts());
  const std::string after((std::istreambuf_iterator<char>(after_in)), {});
  EXPECT_EQ(before, after);
}

TEST(Cluster, HostileRemoteDirectoryIsUsedLiterallyNeverRunByAShell) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(1);
  ClusterControl control(cluster);
  const std::string marker = "/tmp/flotilla-pwned-" + std::to_string(::getpid());
  const std::string hostile =
      cluster.hosts()[0].remote_dir + "/a b;$(touch " + marker + ")`touch " + marker + "`'\"";
  const auto [added, added_out] = control.flotilla(
      {"nodes", "add", "odd", "--host", cluster.hosts()[0].address, "--user",
       cluster.hosts()[0].user, "--key", cluster.key_file().string(), "--remote-dir", hostile});
  ASSERT_EQ(added, 0) << added_out;
  const auto [status, output] = control.flotilla({"--trust-new-host-key", "nodes", "probe", "odd"});
  EXPECT_EQ(status, 0) << output;
  EXPECT_TRUE(std::filesystem::is_directory(hostile + "/bundles")) << output;
  EXPECT_FALSE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
}

std::string file_contents(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A deployed program changed on the node (a byte appended to the agent, the
// trainer replaced by a script that leaves a mark when it runs) is found by
// the hash check before anything of the bundle runs: the bundle is sent
// again, the CLI says so, the run trains, and the changed files never ran.
TEST(Cluster, ATamperedBundleIsDeployedAgainAndNeverRun) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(1);
  ClusterControl control(cluster);
  const auto [probed, probe_out] = control.flotilla({"--trust-new-host-key", "nodes", "probe"});
  ASSERT_EQ(probed, 0) << probe_out;
  const auto bundles = std::filesystem::path(cluster.hosts()[0].remote_dir) / "bundles";
  std::vector<std::filesystem::path> deployed;
  for (const auto& entry : std::filesystem::directory_iterator(bundles))
    deployed.push_back(entry.path());
  ASSERT_EQ(deployed.size(), 1u) << probe_out;
  const auto bundle = deployed.front();
  const auto local = std::filesystem::path(FLOTILLA_CLI_BINARY).parent_path();
  ASSERT_EQ(file_contents(bundle / "flotilla-agent"), file_contents(local / "flotilla-agent"));

  const std::string marker = "/tmp/flotilla-tampered-ran-" + std::to_string(::getpid());
  {
    std::ofstream agent(bundle / "flotilla-agent", std::ios::binary | std::ios::app);
    agent << '\0';
  }
  {
    std::ofstream train(bundle / "flotilla-train", std::ios::binary | std::ios::trunc);
    train << "#!/bin/sh\ntouch " << marker << "\nexit 1\n";
  }

  const auto file = control.write(
      "one.yaml",
      "name: tampered\nmodel: small_cnn\nstrategy: ddp\nnodes: [flh1]\nranks_per_node: 2\n"
      "dataset: synthetic\nsynthetic: {shape: [1, 28, 28], classes: 10, train_samples: 256, "
      "test_samples: 64}\nbatch_size: 32\nepochs: 1\nthreads: 1\n");
  const auto [status, output] = control.flotilla({"run", file.string()});
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("did not match its hash"), std::string::npos) << output;
  EXPECT_NE(output.find("it was deployed again"), std::string::npos) << output;
  const auto row = control.store().run(run_id_in(output));
  ASSERT_TRUE(row) << output;
  EXPECT_EQ(row->state, RunState::finished) << row->reason;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the tampered flotilla-train ran";
  std::filesystem::remove(marker);
  EXPECT_EQ(file_contents(bundle / "flotilla-agent"), file_contents(local / "flotilla-agent"));
  EXPECT_EQ(file_contents(bundle / "flotilla-train"), file_contents(local / "flotilla-train"));

  // A bundle that matches is used as it is: nothing sent, nothing said.
  const auto [again, again_out] = control.flotilla({"nodes", "probe"});
  EXPECT_EQ(again, 0) << again_out;
  EXPECT_NE(again_out.find("already there, nothing uploaded"), std::string::npos) << again_out;
  EXPECT_EQ(again_out.find("did not match"), std::string::npos) << again_out;
}

TEST(Cluster, DdpAcrossThreeNodesFinishesWithEveryRecord) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto file = control.write("ddp.yaml", ddp_experiment("ddp3", 40));
  const auto [status, output] = control.flotilla({"--trust-new-host-key", "run", file.string()});
  ASSERT_EQ(status, 0) << output;
  const auto run = run_id_in(output);
  const auto store = control.store();
  const auto row = store.run(run);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, RunState::finished);
  EXPECT_EQ(row->world_size, 3);
  expect_complete_per_node(store, run, cluster.hosts());
  std::set<int64_t> ranks;
  for (const auto& r : store.records(run))
    if (r.type == "step") {
      const auto j = json::parse(r.body);
      ranks.insert(r.rank);
      EXPECT_EQ(r.node, "flh" + std::to_string(r.rank + 1));
      EXPECT_EQ(j["bytes_sent"], 4 * 421642);  // the small CNN's gradients, all-reduced
    }
  EXPECT_EQ(ranks, (std::set<int64_t>{0, 1, 2}));
}

// `flotilla kill` returns once every node confirmed its end, with no process
// of the run left anywhere, and the reason says which node was stopped on
// request and that the other nodes' ranks ended because their partner left
// (not the Gloo socket errors those ranks died of).
TEST(Cluster, KillReturnsOnceEveryNodeEndedLeavesNoProcessAndSaysWhoWasStopped) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto file = control.write("long.yaml", ddp_experiment("long", 100000));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();
  expect_run_by_the_login(cluster);
  const auto began = std::chrono::steady_clock::now();
  const auto [status, output] = control.flotilla({"kill", run, "--grace", "2"});
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
  std::cout << "flotilla kill of a 3-node DDP run returned after " << took.count() << " s"
            << std::endl;
  EXPECT_EQ(status, 0) << output;
  // Checked the moment the kill returned: it returns only once every node
  // confirmed that no process of the run is left.
  for (const auto& h : cluster.hosts())
    EXPECT_EQ(training_processes(cluster, h.name), std::vector<std::string>{}) << h.name;
  // The goal is under 5 s; 30 s leaves room for this shared 2-core machine
  // and still tells a kill that waited for its 60 s limit (an end it never
  // heard of) from one that heard every node.
  EXPECT_LT(took.count(), 30.0) << output;
  const auto ended = runner->wait(60s);
  ASSERT_TRUE(ended) << runner->output();
  EXPECT_EQ(*ended, 4) << runner->output();  // killed
  const auto row = control.store().run(run);
  EXPECT_EQ(row->state, RunState::killed);
  std::cout << "stored reason: " << row->reason << std::endl;
  EXPECT_NE(row->reason.find("stopped on request"), std::string::npos) << row->reason;
  for (const auto& h : cluster.hosts())
    EXPECT_NE(row->reason.find(h.name), std::string::npos) << row->reason;
  const auto lower = QString::fromStdString(row->reason).toLower().toStdString();
  EXPECT_EQ(lower.find("gloo"), std::string::npos) << row->reason;
  EXPECT_EQ(lower.find("connection reset"), std::string::npos) << row->reason;
  EXPECT_NE(output.find(row->reason), std::string::npos) << output;
  expect_complete_per_node(control.store(), run, cluster.hosts());
}

// A run that starts on two nodes but whose third node's flotilla-train exits
// at once: the run fails with that node's words, and the ranks already
// started on the other two are stopped rather than left waiting out their
// rendezvous (5 minutes).
TEST(Cluster, ARunWhoseThirdNodeCannotTrainFailsWithItsReasonAndLeavesNoRankAnywhere) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  // flh3 again, under another name, with an installed agent beside a broken
  // flotilla-train. The agent is a copy: it finds flotilla-train beside its
  // own resolved path.
  const auto& host = cluster.host("flh3");
  const auto broken = std::filesystem::path(host.remote_dir) / "broken";
  std::filesystem::create_directories(broken);
  std::filesystem::copy_file(
      std::filesystem::path(FLOTILLA_CLI_BINARY).parent_path() / "flotilla-agent",
      broken / "flotilla-agent", std::filesystem::copy_options::overwrite_existing);
  {
    std::ofstream train(broken / "flotilla-train");
    train << "#!/bin/sh\necho 'flotilla-train: this node is broken on purpose' >&2\nexit 3\n";
  }
  std::filesystem::permissions(broken / "flotilla-train", std::filesystem::perms::owner_all);
  cluster.give_to_login(broken);
  const auto [added, added_out] = control.flotilla(
      {"nodes", "add", "broken", "--host", host.address, "--user", host.user, "--key",
       cluster.key_file().string(), "--remote-dir", host.remote_dir + "/broken-home",
       "--agent-path", (broken / "flotilla-agent").string()});
  ASSERT_EQ(added, 0) << added_out;
  auto experiment = ddp_experiment("third-broken", 100000);
  experiment.replace(experiment.find("flh3]"), 5, "broken]");
  const auto file = control.write("broken.yaml", experiment);
  const auto [status, output] =
      control.flotilla({"--trust-new-host-key", "run", file.string()}, 120s);
  EXPECT_EQ(status, 1) << output;  // failed
  const auto run = run_id_in(output);
  ASSERT_FALSE(run.empty()) << output;
  const auto row = control.store().run(run);
  EXPECT_EQ(row->state, RunState::failed);
  EXPECT_NE(row->reason.find("node broken"), std::string::npos) << row->reason;
  EXPECT_NE(row->reason.find("broken on purpose"), std::string::npos) << row->reason;
  std::cout << "stored reason: " << row->reason << std::endl;
  expect_no_process_left_within(cluster, 10s);
}

// The data is checked on each node, where its ranks read it, before any
// rank starts there: a node whose copy is missing or damaged fails the run
// with the node and the file named, no step is trained, and the ranks the
// other nodes had started are stopped.
TEST(Cluster, DataMissingOrDamagedOnOneNodeFailsTheRunNamingTheNodeAndTheFile) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const std::string installed = "/usr/share/datasets/fashion-mnist";
  TempDir empty, damaged;
  for (const auto* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    std::filesystem::copy_file(installed + "/" + name, damaged.path() / name);
  const auto cut = damaged.path() / "t10k-images-idx3-ubyte.gz";  // an interrupted copy
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) / 2);
  // Mounted over the data set's folder, each reads as its own folder (0700):
  // the login user's, as the installed data set is readable by it.
  cluster.give_to_login(empty.path());
  cluster.give_to_login(damaged.path());
  const auto file = control.write("ddp.yaml", ddp_experiment("data", 40));
  const auto fails_on = [&](const std::string& host, const std::string& words) {
    const auto [status, output] =
        control.flotilla({"--trust-new-host-key", "run", file.string()}, 120s);
    EXPECT_EQ(status, 1) << output;  // failed
    const auto run = run_id_in(output);
    ASSERT_FALSE(run.empty()) << output;
    const auto store = control.store();
    const auto row = store.run(run);
    std::cout << "stored reason: " << row->reason << std::endl;
    EXPECT_EQ(row->state, RunState::failed);
    EXPECT_NE(row->reason.find("node " + host + ": "), std::string::npos) << row->reason;
    EXPECT_NE(row->reason.find(words), std::string::npos) << row->reason;
    EXPECT_NE(output.find(words), std::string::npos) << output;
    for (const auto& r : store.records(run)) EXPECT_NE(r.type, "step") << r.node << " trained";
    // Refused by the node's agent before it started a rank: no run there at all.
    EXPECT_NE(row->reason.find("no rank was started"), std::string::npos) << row->reason;
    EXPECT_FALSE(std::filesystem::exists(cluster.host(host).remote_dir + "/home/runs/" + run));
    expect_no_process_left_within(cluster, 10s);
  };
  // Each host has its own mount namespace (cluster.sh starts its sshd with
  // `ip netns exec`): a bind mount made there over SSH changes what that
  // host alone sees in the data set's folder. Only root can mount: the
  // fault is made as root, the run is the hosts' user's.
  cluster.ssh_as_root("flh3", "mount --bind " + empty.path().string() + " " + installed);
  fails_on("flh3", "data_dir: missing \"" + installed +
                       "/train-images-idx3-ubyte.gz\" for dataset \"fashion_mnist\"");
  cluster.ssh_as_root("flh3", "umount " + installed);
  cluster.ssh_as_root("flh2", "mount --bind " + damaged.path().string() + " " + installed);
  fails_on("flh2", "data_dir: \"" + installed + "/t10k-images-idx3-ubyte.gz\" holds ");
  cluster.ssh_as_root("flh2", "umount " + installed);
}

// Deploying to several nodes at once, again and again: each deploy sends the
// whole bundle (the bundles are removed between rounds), all eight at the
// same moment, and none fails or leaves a bundle without its marker.
TEST(Cluster, EightNodesDeployAtOnceTwentyTimesWithoutAFailure) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(8);
  ClusterControl control(cluster);
  std::vector<std::string> probe{"--trust-new-host-key", "nodes", "probe"};
  for (const auto& h : cluster.hosts()) probe.push_back(h.name);
  for (int round = 1; round <= 20; ++round) {
    for (const auto& h : cluster.hosts())
      std::filesystem::remove_all(std::filesystem::path(h.remote_dir) / "bundles");
    const auto [status, output] = control.flotilla(probe, 120s);
    ASSERT_EQ(status, 0) << "round " << round << ": " << output;
    for (const auto& h : cluster.hosts()) {
      size_t complete = 0;
      for (const auto& bundle :
           std::filesystem::directory_iterator(std::filesystem::path(h.remote_dir) / "bundles"))
        complete += std::filesystem::exists(bundle.path() / ".complete");
      EXPECT_EQ(complete, 1u) << "round " << round << ", " << h.name;
    }
  }
}

// A deploy writes nothing of a predictable name in the shared temporary
// directory: a symlink planted there under the bundle marker's old name
// (flotilla-bundle-<hash>) is neither followed nor removed.
TEST(Cluster, ADeployFollowsNoSymlinkPlantedInTheTemporaryDirectory) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(1);
  ClusterControl control(cluster);
  const auto bundles = std::filesystem::path(cluster.hosts()[0].remote_dir) / "bundles";
  const std::vector<std::string> probe{"--trust-new-host-key", "nodes", "probe", "flh1"};
  const auto [first, first_out] = control.flotilla(probe, 120s);
  ASSERT_EQ(first, 0) << first_out;
  std::string hash;
  for (const auto& bundle : std::filesystem::directory_iterator(bundles))
    hash = bundle.path().filename().string();
  ASSERT_FALSE(hash.empty());
  std::filesystem::remove_all(bundles);
  TempDir elsewhere;
  const auto victim = elsewhere.write("victim.txt", "precious\n");
  const auto planted = std::filesystem::temp_directory_path() / ("flotilla-bundle-" + hash);
  std::filesystem::remove(planted);
  std::filesystem::create_symlink(victim, planted);
  const auto [second, second_out] = control.flotilla(probe, 120s);
  const bool still_planted = std::filesystem::is_symlink(planted);
  std::filesystem::remove(planted);
  EXPECT_EQ(second, 0) << second_out;
  EXPECT_TRUE(std::filesystem::exists(bundles / hash / ".complete"));
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious\n") << "the deploy wrote through the planted symlink";
  EXPECT_TRUE(still_planted) << "the deploy removed a file it did not make";
}

TEST(Cluster, ALinkDownAndUpAgainMidRunLosesNoRecord) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto file = control.write("ddp.yaml", ddp_experiment("flaky", 150));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();
  cluster.link("flh2", false);
  std::this_thread::sleep_for(3s);
  cluster.link("flh2", true);
  const auto ended = runner->wait(240s);
  ASSERT_TRUE(ended) << runner->output();
  EXPECT_EQ(*ended, 0) << runner->output();
  expect_complete_per_node(control.store(), run, cluster.hosts());
  size_t steps = 0;
  for (const auto& r : control.store().records(run)) steps += r.type == "step";
  EXPECT_EQ(steps, 3u * 150u);
}

TEST(Cluster, AKilledSupervisorFailsTheRunAndStopsEveryNodesRanks) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto file = control.write("long.yaml", ddp_experiment("doomed", 100000));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();
  int killed = 0;
  for (const auto& [pid, cmdline] : cluster.processes_on("flh2"))
    if (cmdline.find("supervise") != std::string::npos) killed += ::kill(pid, SIGKILL) == 0;
  ASSERT_EQ(killed, 1);
  const auto ended = runner->wait(120s);
  ASSERT_TRUE(ended) << runner->output();
  EXPECT_EQ(*ended, 1) << runner->output();  // failed
  const auto row = control.store().run(run);
  EXPECT_EQ(row->state, RunState::failed);
  EXPECT_NE(row->reason.find("supervisor died"), std::string::npos) << row->reason;
  for (const auto& h : cluster.hosts())
    EXPECT_EQ(training_processes(cluster, h.name), std::vector<std::string>{}) << h.name;
}

TEST(Cluster, AttachAfterTheControllerDiedCompletesEveryNodesRecords) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto file = control.write("ddp.yaml", ddp_experiment("reattach", 120));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();
  runner->kill(SIGKILL);  // the controller dies; ranks train on under their supervisors
  runner->wait(10s);
  const auto [status, output] = control.flotilla({"attach", run}, 300s);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(control.store().run(run)->state, RunState::finished);
  expect_complete_per_node(control.store(), run, cluster.hosts());
  size_t steps = 0;
  for (const auto& r : control.store().records(run)) steps += r.type == "step";
  EXPECT_EQ(steps, 3u * 120u);
}

TEST(Cluster, AKillForAnUnreachableNodeIsRetriedUntilItIsBack) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto file = control.write("long.yaml", ddp_experiment("unreachable", 100000));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();
  runner->kill(SIGKILL);
  runner->wait(10s);
  cluster.link("flh3", false);
  auto killer = control.start({"kill", run, "--grace", "2"}, "kill.txt");
  std::this_thread::sleep_for(20s);  // past the connect timeout: the kill is being retried
  EXPECT_FALSE(killer->wait(0ms)) << killer->output();
  cluster.link("flh3", true);
  const auto status = killer->wait(120s);
  ASSERT_TRUE(status) << killer->output();
  EXPECT_EQ(*status, 0) << killer->output();
  EXPECT_NE(killer->output().find("node flh3 is unreachable"), std::string::npos)
      << killer->output();
  EXPECT_EQ(control.store().run(run)->state, RunState::killed);
  for (const auto& h : cluster.hosts())
    EXPECT_EQ(training_processes(cluster, h.name), std::vector<std::string>{}) << h.name;
}

TEST(Cluster, AnAgentKilledMidRunIsReplacedAndTheStreamResumes) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto file = control.write("ddp.yaml", ddp_experiment("agent-lost", 150));
  auto runner = control.start({"--trust-new-host-key", "run", file.string()}, "run.txt");
  const auto run = control.wait_for_records(5, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();
  // The agent that talks to this controller, not the run's supervisor.
  int killed = 0;
  for (const auto& [pid, cmdline] : cluster.processes_on("flh2"))
    if (cmdline.find("flotilla-agent") != std::string::npos &&
        cmdline.find("supervise") == std::string::npos)
      killed += ::kill(pid, SIGKILL) == 0;
  ASSERT_EQ(killed, 1);
  const auto ended = runner->wait(240s);
  ASSERT_TRUE(ended) << runner->output();
  EXPECT_EQ(*ended, 0) << runner->output();
  EXPECT_NE(runner->output().find("node flh2: reconnected"), std::string::npos) << runner->output();
  expect_complete_per_node(control.store(), run, cluster.hosts());
  size_t steps = 0;
  for (const auto& r : control.store().records(run)) steps += r.type == "step";
  EXPECT_EQ(steps, 3u * 150u);
}

TEST(Cluster, SshAgentLoginAndInstalledBinariesNeedNoKeyFileAndNoBundle) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(1);
  ClusterControl control(cluster);
  TempDir dir;
  const auto socket = (dir.path() / "agent.sock").string();
  // In the foreground, as our child: it dies with the test, failed or not. A
  // daemonised agent outlives it (`ssh-agent -k` needs SSH_AGENT_PID) and keeps
  // every descriptor it inherited, a build lock among them.
  auto agent = std::make_unique<ChildProcess>(
      std::vector<std::string>{"/usr/bin/ssh-agent", "-D", "-a", socket}, dir.path() / "agent.txt");
  for (int i = 0; i < 200 && !std::filesystem::exists(socket); ++i)
    std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(std::filesystem::exists(socket)) << agent->output();
  const std::string env = "SSH_AUTH_SOCK=" + socket;
  ASSERT_EQ(shell(env + " ssh-add " + cluster.key_file().string()).first, 0);
  const auto& host = cluster.hosts()[0];
  const std::string installed =
      std::filesystem::path(FLOTILLA_CLI_BINARY).parent_path() / "flotilla-agent";
  const auto [added, added_out] =
      control.flotilla({"nodes", "add", "viaagent", "--host", host.address, "--user", host.user,
                        "--remote-dir", host.remote_dir + "/installed", "--agent-path", installed});
  ASSERT_EQ(added, 0) << added_out;
  auto argv = control.base();
  for (const auto& a : {"--trust-new-host-key", "nodes", "probe", "viaagent"}) argv.push_back(a);
  ChildProcess probe(argv, dir.path() / "probe.txt", {env});
  const auto status = probe.wait(60s);
  agent.reset();
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 0) << probe.output();
  EXPECT_NE(probe.output().find("viaagent: "), std::string::npos) << probe.output();
  EXPECT_FALSE(std::filesystem::exists(host.remote_dir + "/installed/bundles"));
  // Without the agent there is no key to log in with.
  const auto [refused, refusal] = control.flotilla({"nodes", "probe", "viaagent"});
  EXPECT_EQ(refused, 1);
  EXPECT_NE(refusal.find("ssh-agent"), std::string::npos) << refusal;
}

TEST(Cluster, PipelineDdpPutsOnePipelinePerNodeAndItsStagePeersAcrossNodes) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  ClusterControl control(cluster);
  // The seeds' Pipe+DDP: "a single Pipe is on the GPUs of a machine, DDP across machines".
  const auto file = control.write(
      "pipe.yaml",
      "name: pipe-ddp\nmodel: small_cnn\ndataset: fashion_mnist\nstrategy: pipeline_ddp\n"
      "nodes: [flh1, flh2]\nranks_per_node: 2\nreplicas: 2\nchunks: 2\nbatch_size: 64\n"
      "epochs: 1\nmax_steps: 20\nthreads: 1\nbalance: [2, 2]\n");
  const auto [status, output] = control.flotilla({"--trust-new-host-key", "run", file.string()});
  ASSERT_EQ(status, 0) << output;
  const auto run = run_id_in(output);
  expect_complete_per_node(control.store(), run, cluster.hosts());
  size_t steps = 0;
  for (const auto& r : control.store().records(run)) {
    if (r.type != "step") continue;
    ++steps;
    const auto j = json::parse(r.body);
    EXPECT_EQ(r.node, "flh" + std::to_string(r.rank / 2 + 1));
    EXPECT_EQ(j["replica"], r.rank / 2);  // one pipeline per node
    EXPECT_EQ(j["stage"], r.rank % 2);
    EXPECT_GT(j["algbw_gbps"].get<double>(), 0.0);  // stage peers all-reduce across nodes
  }
  EXPECT_EQ(steps, 4u * 20u);
}

}  // namespace
}  // namespace flotilla::testing
