// What reaches a node's shell and database: node fields as `nodes add` checks
// them, and argv quoting that survives any byte.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

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

}  // namespace
}  // namespace flotilla::controller
