// What reaches a node's shell and database: node fields as `nodes add` checks
// them, and argv quoting that survives any byte.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "flotilla/controller/nodes.h"
#include "flotilla/controller/store.h"
#include "node_access.h"
#include "shell_quote.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

std::string sh_output(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[512];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

TEST(ShellQuote, EveryHostileWordReachesTheProgramByteForByte) {
  const std::string marker = "/tmp/flotilla-quote-" + std::to_string(::getpid());
  const std::vector<std::string> words{"$(touch " + marker + ")",
                                       "`touch " + marker + "`",
                                       "; touch " + marker,
                                       "it's \"quoted\"",
                                       "line\nbreak",
                                       "*",
                                       "-n",
                                       "",
                                       "back\\slash $HOME"};
  std::vector<std::string> argv{"printf", "%s|"};
  argv.insert(argv.end(), words.begin(), words.end());
  // command_line's words pass through /bin/sh -c as the node's shell does.
  const auto out = sh_output("/bin/sh -c " + shell_quote(command_line(argv)));
  std::string expected;
  for (const auto& w : words) expected += w + "|";
  EXPECT_EQ(out, expected);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(NodeFields, HostileOrBrokenValuesAreRefusedNamingTheField) {
  NodeRow n;
  n.name = "a;rm -rf /";
  n.host = "-oProxyCommand=touch /tmp/x";
  n.port = 70000;
  n.user = "root$(id)";
  n.key_file = "/no/such/key";
  n.remote_dir = "ok\nnot";
  n.tags = "gpu,$(x)";
  const auto problems = validate_node(n);
  ASSERT_EQ(problems.size(), 7u);
  EXPECT_EQ(problems[0].rfind("name: ", 0), 0u);
  EXPECT_EQ(problems[1].rfind("host: ", 0), 0u);
  EXPECT_EQ(problems[2], "port: must be in 1..65535, got 70000");
  EXPECT_EQ(problems[3].rfind("user: ", 0), 0u);
  EXPECT_EQ(problems[4], "key_file: no such file: /no/such/key");
  EXPECT_EQ(problems[5], "remote_dir: must not contain line breaks or NUL");
  EXPECT_EQ(problems[6].rfind("tags: ", 0), 0u);

  NodeRow good;
  good.name = "gpu-01.lab";
  good.host = "10.0.0.5";
  good.user = "train_er";
  good.tags = "gpu,a100";
  EXPECT_TRUE(validate_node(good).empty());
  good.name = "local";
  EXPECT_EQ(validate_node(good).size(), 1u);
}

TEST(NodeStore, AddListProbeAndRemoveButNotWhileALiveRunUsesIt) {
  testing::TempDir dir;
  Store store(QString::fromStdString((dir.path() / "n.db").string()));
  NodeRow n;
  n.name = "n1";
  n.host = "10.0.0.1";
  n.port = 2222;
  n.tags = "gpu";
  store.add_node(n);
  EXPECT_THROW(store.add_node(n), StoreError);
  const auto back = store.node("n1");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->port, 2222);
  EXPECT_FALSE(back->probed_ms);
  store.save_probe("n1", R"({"cpus":8,"memory_bytes":1073741824,"disk_free_bytes":0,"gpus":[]})");
  EXPECT_TRUE(store.node("n1")->probed_ms);
  EXPECT_NE(probe_summary(store.node("n1")->probe_json).find("8 CPUs"), std::string::npos);

  RunRow run;
  run.id = "20261122-000000-abcd";
  run.experiment_name = "x";
  run.config_json = "{}";
  run.nodes = {"local", "n1"};
  run.created_ms = now_ms();
  store.create_run(run);
  try {
    store.remove_node("n1");
    FAIL() << "removed a node a live run uses";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("in use by live run " + run.id), std::string::npos);
  }
  store.transition(run.id, RunState::failed, "test");
  store.remove_node("n1");
  EXPECT_FALSE(store.node("n1"));
  EXPECT_THROW(store.remove_node("n1"), StoreError);
}

TEST(NodeStore, EditKeepsTheProbeAndIsRefusedWhileALiveRunUsesTheNode) {
  testing::TempDir dir;
  Store store(QString::fromStdString((dir.path() / "n.db").string()));
  NodeRow n;
  n.name = "n1";
  n.host = "10.0.0.1";
  store.add_node(n);
  store.save_probe("n1", R"({"cpus":4,"memory_bytes":0,"disk_free_bytes":0,"gpus":[]})");
  n.host = "10.0.0.2";
  n.port = 2200;
  n.user = "trainer";
  store.update_node(n);
  auto back = store.node("n1");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->host, "10.0.0.2");
  EXPECT_EQ(back->port, 2200);
  EXPECT_EQ(back->user, "trainer");
  EXPECT_TRUE(back->probed_ms) << "the probe is kept";
  NodeRow missing = n;
  missing.name = "n2";
  EXPECT_THROW(store.update_node(missing), StoreError);

  RunRow run;
  run.id = "20261122-000000-beef";
  run.experiment_name = "x";
  run.config_json = "{}";
  run.nodes = {"n1"};
  run.created_ms = now_ms();
  store.create_run(run);
  n.host = "10.0.0.3";
  try {
    store.update_node(n);
    FAIL() << "edited a node a live run uses";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("in use by live run " + run.id), std::string::npos);
  }
  EXPECT_EQ(store.node("n1")->host, "10.0.0.2");
}

const char* kTwoGpus =
    R"({"os":"Debian GNU/Linux 12","kernel":"Linux 6.1","hostname":"g1","cpus":32,)"
    R"("memory_bytes":1,"disk_free_bytes":1,"free_port":0,)"
    R"("gpus":[{"index":0,"name":"NVIDIA A100","memory_bytes":42949672960},)"
    R"({"index":1,"name":"NVIDIA A100","memory_bytes":42949672960}]})";

// The permission bits of `path`, as octal digits ("600").
std::string mode_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  char digits[8];
  std::snprintf(digits, sizeof digits, "%o", st.st_mode & 07777);
  return digits;
}

std::string contents_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Restores the umask a test changed, also when it fails.
struct UmaskFor {
  explicit UmaskFor(mode_t mask) : previous(::umask(mask)) {}
  ~UmaskFor() { ::umask(previous); }
  mode_t previous;
};

TEST(KnownHosts, ANewFileIs0600InA0700FolderWhateverTheUmask) {
  testing::TempDir dir;
  const auto file = dir.path() / "flotilla" / "known_hosts";
  {
    UmaskFor open_umask(0);
    record_known_host(file, "10.77.0.11 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA1\n");
    record_known_host(file, "[10.77.0.12]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA2");
  }
  EXPECT_EQ(mode_of(file), "600");
  EXPECT_EQ(mode_of(file.parent_path()), "700");
  EXPECT_EQ(contents_of(file),
            "10.77.0.11 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA1\n"
            "[10.77.0.12]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA2\n");
}

TEST(KnownHosts, AnOpenFileIsMade0600AndKeepsWhatItHeld) {
  testing::TempDir dir;
  // A file a person edited: readable by all, no line break at its end.
  const auto file = dir.write("known_hosts", "10.0.0.1 ssh-ed25519 AAAAold");
  std::filesystem::permissions(file, std::filesystem::perms(0644));
  ASSERT_EQ(mode_of(file), "644");
  record_known_host(file, "10.0.0.2 ssh-ed25519 AAAAnew\n");
  EXPECT_EQ(mode_of(file), "600");
  EXPECT_EQ(contents_of(file), "10.0.0.1 ssh-ed25519 AAAAold\n10.0.0.2 ssh-ed25519 AAAAnew\n");
}

TEST(KnownHosts, AFileThatCannotBeWrittenIsAnErrorNamingIt) {
  testing::TempDir dir;
  const auto file = dir.path() / "not-a-folder" / "known_hosts";
  dir.write("not-a-folder", "a file where the folder should be");
  try {
    record_known_host(file, "10.0.0.2 ssh-ed25519 AAAAnew\n");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}

TEST(NodeProbe, AStoredProbeReadsBackAsTheAgentsAnswer) {
  const auto probe = parse_probe(kTwoGpus);
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->os, "Debian GNU/Linux 12");
  EXPECT_EQ(probe->cpus, 32);
  ASSERT_EQ(probe->gpus.size(), 2u);
  EXPECT_EQ(probe->gpus[1].name, "NVIDIA A100");
  EXPECT_EQ(probe->gpus[1].memory_bytes, 42949672960);
  EXPECT_FALSE(parse_probe(""));
  EXPECT_FALSE(parse_probe("not json"));
  EXPECT_FALSE(parse_probe(R"({"cpus":"many"})"));
}

TEST(NodePlacement, MoreRanksThanANodesGpusIsRefusedNamingTheNode) {
  std::vector<NodeRow> nodes(3);
  nodes[0].name = "local";
  nodes[1].name = "g1";
  nodes[1].probe_json = kTwoGpus;
  nodes[2].name = "fresh";  // never probed
  ExperimentConfig c;
  c.dataset = DatasetKind::synthetic;
  c.strategy = Strategy::ddp;
  c.device = DeviceKind::cuda;
  c.nodes = {"g1", "fresh"};
  c.ranks_per_node = 2;
  EXPECT_TRUE(placement_problems(c, nodes).empty());
  c.ranks_per_node = 3;
  const auto problems = placement_problems(c, nodes);
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0],
            "nodes: node \"g1\" has 2 GPUs, but device cuda needs 3 GPUs there (ranks_per_node "
            "3)");
  c.device = DeviceKind::cpu;
  EXPECT_TRUE(placement_problems(c, nodes).empty()) << "CPU ranks need no GPU";

  c.nodes = {"g1", "nowhere"};
  const auto unknown = placement_problems(c, nodes);
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0], "nodes: \"nowhere\" is not a known node (known: local,g1,fresh)");
  c.nodes = {"local", "g1"};
  ASSERT_EQ(placement_problems(c, nodes).size(), 1u);
  EXPECT_NE(placement_problems(c, nodes)[0].find("\"local\" cannot share"), std::string::npos);
}

TEST(NodePlacement, ASlurmLoginNodeIsNamedAloneWithASlurmSectionThatFitsItsPartition) {
  std::vector<NodeRow> nodes(2);
  nodes[0].name = "hpc";
  nodes[0].kind = NodeKind::slurm;
  nodes[0].slurm_partition = "gpu";
  nodes[0].probe_json =
      R"({"os":"Debian","kernel":"Linux","cpus":8,"memory_bytes":1,"disk_free_bytes":1,)"
      R"("free_port":1,"gpus":[],"slurm":{"version":"22.05.8","partitions":[)"
      R"({"name":"gpu","default":false,"nodes":["g1","g2"]},)"
      R"({"name":"cpu","default":true,"nodes":["c1","c2","c3"]}]}})";
  nodes[1].name = "box";
  ExperimentConfig c;
  c.dataset = DatasetKind::synthetic;
  c.strategy = Strategy::ddp;
  c.nodes = {"hpc"};
  auto problems = placement_problems(c, nodes);
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0],
            "nodes: \"hpc\" is a SLURM login node: say how many of its cluster's nodes the run "
            "takes with slurm: {nodes: N}");

  c.slurm.nodes = 3;  // the node's partition, gpu, has two
  problems = placement_problems(c, nodes);
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0], "slurm.nodes: 3, but partition gpu of hpc has 2 nodes");
  c.slurm.partition = "cpu";  // the run's own partition wins
  problems = placement_problems(c, nodes);
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  c.slurm.partition = "big";
  EXPECT_EQ(placement_problems(c, nodes)[0],
            "slurm.partition: \"big\" is not a partition of hpc's cluster (its partitions: "
            "gpu,cpu)");
  // A run that fits the node's partition is placed: its job goes there.
  c.slurm.partition.clear();
  c.slurm.nodes = 2;
  problems = placement_problems(c, nodes);
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);

  c.nodes = {"hpc", "box"};
  EXPECT_NE(placement_problems(c, nodes)[0].find("a run on it names it alone"), std::string::npos);
  c.nodes = {"box"};
  EXPECT_EQ(placement_problems(c, nodes)[0],
            "slurm.nodes: a SLURM run names one SLURM login node in nodes (flotilla nodes add "
            "NAME --slurm ...), got box");
}

// A TCP port that accepts connections (the kernel completes them) and never
// says anything: an SSH server that hangs before its banner.
class SilentPort {
 public:
  SilentPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 8);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~SilentPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

TEST(NodeProbe, ProbesInParallelStoresWhatAnswersAndNamesWhyTheOthersDidNot) {
  testing::TempDir dir;
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir.path() / "agent-home").string()));
  Store store(QString::fromStdString((dir.path() / "p.db").string()));
  SilentPort silent;
  NodeRow hung;
  hung.name = "hung";
  hung.host = "127.0.0.1";
  hung.port = silent.port();
  store.add_node(hung);
  ConnectOptions options;
  options.agent_binary = FLOTILLA_AGENT_BINARY;
  options.known_hosts = dir.path() / "known_hosts";
  options.timeout = std::chrono::seconds(1);
  std::atomic<int> reported{0};
  const auto outcomes = probe_nodes(store, {"local", "hung", "ghost"}, options,
                                    [&](const ProbeOutcome&) { ++reported; });
  EXPECT_EQ(reported, 3);
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(outcomes[0].reached) << outcomes[0].error;
  EXPECT_TRUE(store.node("local")->probed_ms);
  const auto local = parse_probe(store.node("local")->probe_json);
  ASSERT_TRUE(local);
  EXPECT_GT(local->cpus, 0);

  EXPECT_FALSE(outcomes[1].reached);
  EXPECT_FALSE(outcomes[1].error.empty());
  EXPECT_FALSE(outcomes[1].host_key);
  EXPECT_FALSE(store.node("hung")->probed_ms) << "a failed probe stores nothing";
  EXPECT_FALSE(outcomes[2].reached);
  EXPECT_NE(outcomes[2].error.find("no node \"ghost\""), std::string::npos) << outcomes[2].error;
  qunsetenv("FLOTILLA_HOME");
}

}  // namespace
}  // namespace flotilla::controller
