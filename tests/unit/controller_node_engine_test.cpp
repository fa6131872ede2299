// A node's own engine (docs/nodes.md): when a node builds one, what the
// build's answer says, when a built one may run, and what the store keeps.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <QProcess>
#include <QStandardPaths>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine_on_node.h"
#include "flotilla/controller/nodes.h"
#include "flotilla/controller/store.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

NodeRow ssh_node(const std::string& torch = "") {
  NodeRow n;
  n.name = "gpu1";
  n.host = "10.0.0.9";
  n.torch_prefix = torch;
  return n;
}

protocol::ProbeReply probe_with_gpus(size_t gpus) {
  protocol::ProbeReply probe;
  probe.gpus.resize(gpus);
  return probe;
}

TEST(NodeEngine, ANodeBuildsOneWhenItNamesALibTorchOrItsGpusNeedOne) {
  EXPECT_EQ(own_engine_reason(ssh_node(), probe_with_gpus(0), false), "");
  EXPECT_EQ(own_engine_reason(ssh_node(), probe_with_gpus(2), true), "");
  EXPECT_EQ(own_engine_reason(ssh_node(), probe_with_gpus(2), false),
            "its 2 GPUs need a CUDA engine and the bundled one is built for the CPU");
  EXPECT_EQ(own_engine_reason(ssh_node("/opt/libtorch"), probe_with_gpus(0), true),
            "the node names its LibTorch (/opt/libtorch)");
  // Never where the engine is not the bundle's to replace.
  auto installed = ssh_node("/opt/libtorch");
  installed.agent_path = "/usr/bin/flotilla-agent";
  EXPECT_EQ(own_engine_reason(installed, probe_with_gpus(4), false), "");
  auto login = ssh_node();
  login.kind = NodeKind::slurm;
  EXPECT_EQ(own_engine_reason(login, probe_with_gpus(4), false), "");
  auto local = ssh_node();
  local.name = "local";
  EXPECT_EQ(own_engine_reason(local, probe_with_gpus(4), false), "");
}

TEST(NodeEngine, TheBuildsLastLineSaysWhatWasBuiltAndNoLineIsAnError) {
  const auto engine = engine_from_build_output(
      "engine build: compile (2 jobs)\n[1/2] Building\n"
      "FLOTILLA_ENGINE {\"path\":\"/h/.flotilla/engines/ab/torch-2.5.1-9/flotilla-train\","
      "\"torch_version\":\"2.5.1\",\"torch_dir\":\"/opt/libtorch/share/cmake/Torch\","
      "\"cuda\":true}\n");
  EXPECT_EQ(engine.path, "/h/.flotilla/engines/ab/torch-2.5.1-9/flotilla-train");
  EXPECT_EQ(engine.torch_version, "2.5.1");
  EXPECT_TRUE(engine.cuda);
  EXPECT_THROW(engine_from_build_output("engine build: compile\n"), std::runtime_error);
  EXPECT_THROW(engine_from_build_output("FLOTILLA_ENGINE {\"cuda\":true}\n"), std::runtime_error);
}

TEST(NodeEngine, ABuiltEngineRunsOnlyWhileItsSourcesAndLibTorchAreTheNodesOwn) {
  NodeEngine built;
  built.path = "/h/e/flotilla-train";
  built.source = "0123456789abcdef";
  built.torch_prefix = "/opt/libtorch";
  built.torch_version = "2.5.1";
  auto node = ssh_node("/opt/libtorch");
  node.engine_json = node_engine_json(built);
  EXPECT_EQ(engine_staleness(node, "0123456789abcdef"), "");
  EXPECT_EQ(engine_to_run(node, "0123456789abcdef"), "/h/e/flotilla-train");

  EXPECT_EQ(engine_staleness(node, "fedcba9876543210"),
            "node gpu1: its engine was built from another Flotilla's sources; `flotilla nodes "
            "probe gpu1` builds it again");
  EXPECT_FALSE(engine_to_run(node, "fedcba9876543210"));
  node.torch_prefix = "/opt/other";
  EXPECT_EQ(engine_staleness(node, "0123456789abcdef"),
            "node gpu1: its engine was built against another LibTorch (/opt/libtorch); "
            "`flotilla nodes probe gpu1` builds it again");
  EXPECT_FALSE(engine_to_run(ssh_node(), "0123456789abcdef"));  // none built: the bundle's
  EXPECT_EQ(engine_summary(ssh_node("/opt/libtorch")), "bundled (not built yet)");
  node.torch_prefix = "/opt/libtorch";
  EXPECT_EQ(engine_summary(node), "built against LibTorch 2.5.1 (CPU) at /opt/libtorch");
  built.torch_prefix = "";
  built.torch_dir = "/usr/lib/python3/dist-packages/torch/share/cmake/Torch";
  auto python = ssh_node();
  python.engine_json = node_engine_json(built);
  EXPECT_EQ(engine_summary(python),
            "built against LibTorch 2.5.1 (CPU) at python3's torch "
            "(/usr/lib/python3/dist-packages/torch/share/cmake/Torch)");
}

TEST(NodeEngine, TheStoreKeepsTheNamedLibTorchAndTheBuiltEngine) {
  testing::TempDir dir;
  Store store(QString::fromStdString((dir.path() / "n.db").string()));
  store.add_node(ssh_node("/opt/libtorch"));
  EXPECT_EQ(store.node("gpu1")->torch_prefix, "/opt/libtorch");
  EXPECT_EQ(store.node("gpu1")->engine_json, "");
  store.save_engine("gpu1", R"({"path":"/e/flotilla-train"})");
  EXPECT_EQ(parse_node_engine(store.node("gpu1")->engine_json)->path, "/e/flotilla-train");
  auto edited = *store.node("gpu1");
  edited.torch_prefix = "/opt/other";
  store.update_node(edited);
  EXPECT_EQ(store.node("gpu1")->torch_prefix, "/opt/other");
  // An edit keeps what was built; whether it may run is engine_staleness's to say.
  EXPECT_EQ(parse_node_engine(store.node("gpu1")->engine_json)->path, "/e/flotilla-train");
}

TEST(NodeEngine, ANamedLibTorchIsAnAbsolutePathOnANodeThatRunsTheBundle) {
  EXPECT_TRUE(validate_node(ssh_node("/opt/libtorch")).empty());
  EXPECT_EQ(validate_node(ssh_node("libtorch")),
            std::vector<std::string>{
                "torch: expected the absolute path of a LibTorch on the node, got \"libtorch\""});
  auto installed = ssh_node("/opt/libtorch");
  installed.agent_path = "/usr/bin/flotilla-agent";
  EXPECT_EQ(validate_node(installed),
            std::vector<std::string>{
                "torch: only a node that runs the deployed bundle builds its own engine"});
  EXPECT_EQ(validate_node(ssh_node("/opt/a\nb")).front(),
            "torch: must not contain line breaks or NUL");
}

// scripts/build_engine_on_node.sh as a node runs it, on a PATH that has only
// what the test puts there: what is missing is named before anything builds.
struct ScriptRun {
  int exit_code = -1;
  QString err;
};
ScriptRun run_build_script(const testing::TempDir& dir, const QString& torch) {
  QProcess script;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("PATH", QString::fromStdString((dir.path() / "bin").string()));
  script.setProcessEnvironment(env);
  script.start("/bin/sh",
               {FLOTILLA_BUILD_ENGINE_SCRIPT, torch, QString::fromStdString(dir.path().string())});
  script.waitForFinished(30000);
  return {script.exitCode(), QString::fromUtf8(script.readAllStandardError())};
}

void put_tool(const testing::TempDir& dir, const std::string& name, const std::string& body) {
  const auto file = dir.write("bin/" + name, "#!/bin/sh\n" + body + "\n");
  std::filesystem::permissions(file, std::filesystem::perms::owner_all);
}

TEST(NodeEngineScript, NamesWhatTheNodeLacksBeforeBuilding) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "bin");
  // The text tools every node has; the build's tools are what the test gives.
  for (const char* tool : {"sed", "cut", "find", "head", "dirname", "cksum", "grep"})
    std::filesystem::create_symlink(QStandardPaths::findExecutable(tool).toStdString(),
                                    dir.path() / "bin" / tool);
  auto run = run_build_script(dir, "");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(run.err.startsWith("engine build: this node has no cmake on the PATH"))
      << run.err.toStdString();

  put_tool(dir, "cmake", "echo 'cmake version 3.18.4'");
  put_tool(dir, "c++", "exit 0");
  put_tool(dir, "tar", "exit 0");
  run = run_build_script(dir, "");
  EXPECT_TRUE(run.err.startsWith("engine build: this node has neither ninja nor make"))
      << run.err.toStdString();

  put_tool(dir, "ninja", "exit 0");
  run = run_build_script(dir, "");
  EXPECT_EQ(run.err.trimmed(),
            "engine build: this node's cmake is 3.18.4; the engine needs 3.25 or newer");

  put_tool(dir, "cmake", "echo 'cmake version 3.25.1'");
  run = run_build_script(dir, QString::fromStdString(dir.path().string()));
  EXPECT_TRUE(run.err.startsWith("engine build: no LibTorch at " +
                                 QString::fromStdString(dir.path().string()) +
                                 ": no TorchConfig.cmake under it"))
      << run.err.toStdString();
  run = run_build_script(dir, "");
  EXPECT_EQ(run.err.trimmed(),
            "engine build: no LibTorch: the node was given no --torch PREFIX and has no python3 "
            "with torch");
  EXPECT_EQ(run.exit_code, 1);
}

// Two probes of one node at once (a window and a CLI): the second build
// waits for the first instead of writing the same folder, then finds its
// engine. cmake is a stand-in whose configure blocks on a pipe until the
// test writes to it.
TEST(NodeEngineScript, ASecondBuildWaitsForTheFirstAndUsesItsEngine) {
  testing::TempDir dir;
  const auto torch = dir.path() / "torch";
  std::filesystem::create_directories(torch / "share/cmake/Torch");
  std::filesystem::create_directories(dir.path() / "bin");
  dir.write("torch/share/cmake/Torch/TorchConfig.cmake", "");
  dir.write("torch/share/cmake/Torch/TorchConfigVersion.cmake", "set(PACKAGE_VERSION \"2.9.9\")\n");
  std::filesystem::create_directories(dir.path() / "src");
  // The stand-in's configure blocks reading this pipe until the test writes.
  const auto release = dir.path() / "release";
  ASSERT_EQ(mkfifo(release.c_str(), 0600), 0);
  const auto configured = dir.path() / "configured.log";
  put_tool(
      dir, "cmake",
      "case \"$1\" in\n"
      "  --version) echo 'cmake version 3.25.1' ;;\n"
      "  --build) mkdir -p \"$2/bin\"; printf '#!/bin/sh\\nexit 0\\n' > \"$2/bin/flotilla-train\";"
      " chmod +x \"$2/bin/flotilla-train\"; echo '[1/1] Linking flotilla-train' ;;\n"
      "  *) echo configure >> " +
          configured.string() + "; read go < " + release.string() +
          " ;;\n"
          "esac");
  put_tool(dir, "c++", "exit 0");
  put_tool(dir, "ninja", "exit 0");
  const auto start = [&](QProcess& script) {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("PATH",
               QString::fromStdString((dir.path() / "bin").string()) + ":" + env.value("PATH"));
    script.setProcessEnvironment(env);
    script.start("/bin/sh", {FLOTILLA_BUILD_ENGINE_SCRIPT, QString::fromStdString(torch.string()),
                             QString::fromStdString(dir.path().string())});
  };
  const auto said_until = [](QProcess& script, const QString& words) {
    QString out;
    while (!out.contains(words) && script.waitForReadyRead(30000))
      out += QString::fromUtf8(script.readAllStandardOutput());
    return out;
  };

  QProcess first, second;
  start(first);
  said_until(first, "engine build: configure");
  start(second);
  const auto waited = said_until(second, "waiting for it");
  EXPECT_TRUE(waited.contains("another build against LibTorch 2.9.9 is running on this node"))
      << waited.toStdString();
  std::ofstream(release) << "go\n";  // opens once the first build's configure reads
  ASSERT_TRUE(first.waitForFinished(30000));
  ASSERT_TRUE(second.waitForFinished(30000));
  EXPECT_EQ(first.exitCode(), 0) << first.readAllStandardError().toStdString();
  EXPECT_EQ(second.exitCode(), 0) << second.readAllStandardError().toStdString();
  const auto second_said = QString::fromUtf8(second.readAllStandardOutput());
  EXPECT_TRUE(second_said.contains("already built against LibTorch 2.9.9"))
      << second_said.toStdString();
  EXPECT_TRUE(second_said.contains("FLOTILLA_ENGINE {")) << second_said.toStdString();
  std::ifstream log(configured);
  const std::string configures{std::istreambuf_iterator<char>(log), {}};
  EXPECT_EQ(configures, "configure\n") << "configured once, by the first build";
}

}  // namespace
}  // namespace flotilla::controller
