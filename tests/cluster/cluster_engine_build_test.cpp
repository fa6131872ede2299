// A node's own engine (docs/nodes.md): a node that names a LibTorch builds
// flotilla-train there against it at its probe, once per source bundle and
// LibTorch, and its ranks run that engine; a LibTorch that is not there is
// named. The node's LibTorch here is Debian's, the one this build links, so
// the engine built there and the bundle's train together.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <iostream>

#include "cluster_control.h"
#include "flotilla/controller/store.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

bool says(const std::string& output, const std::string& what) {
  return output.find(what) != std::string::npos;
}

// The `nodes list` line of `node`.
std::string list_line(const std::string& list, const std::string& node) {
  std::istringstream lines(list);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(node + " ", 0) == 0) return line;
  return {};
}

TEST(NodeEngineBuild, ANodeNamingItsLibTorchBuildsItsEngineOnceAndItsRanksRunIt) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  ClusterControl control(cluster, false);
  const auto& own = cluster.hosts().at(0);      // builds against the named LibTorch
  const auto& bundled = cluster.hosts().at(1);  // runs the bundle's engine
  const auto add = [&](const ClusterHost& h, const std::string& name, const std::string& torch) {
    std::vector<std::string> args{"nodes",        "add",       name,
                                  "--host",       h.address,   "--user",
                                  h.user,         "--key",     cluster.key_file().string(),
                                  "--remote-dir", h.remote_dir};
    if (!torch.empty()) args.insert(args.end(), {"--torch", torch});
    const auto [status, said] = control.flotilla(args);
    EXPECT_EQ(status, 0) << said;
  };
  add(own, own.name, FLOTILLA_TORCH_DIR);
  add(bundled, bundled.name, "");

  // The first probe builds, saying so as it goes; the second finds it built.
  const auto [built, build_said] =
      control.flotilla({"--trust-new-host-key", "nodes", "probe", own.name, bundled.name}, 1800s);
  ASSERT_EQ(built, 0) << build_said;
  std::cout << build_said << std::endl;
  EXPECT_TRUE(says(build_said, own.name + ": engine build: building against LibTorch "))
      << build_said;
  EXPECT_TRUE(says(build_said, own.name + ": engine build: compile")) << build_said;
  EXPECT_TRUE(says(build_said, "  engine: built against LibTorch ")) << build_said;
  EXPECT_FALSE(says(build_said, bundled.name + ": engine build")) << build_said;
  const auto [again, again_said] = control.flotilla({"nodes", "probe", own.name}, 300s);
  ASSERT_EQ(again, 0) << again_said;
  EXPECT_TRUE(says(again_said, own.name + ": engine build: already built against LibTorch "))
      << again_said;
  EXPECT_FALSE(says(again_said, "engine build: compile")) << again_said;

  const auto [listed, list] = control.flotilla({"nodes", "list"});
  ASSERT_EQ(listed, 0) << list;
  std::cout << again_said << list << std::endl;
  EXPECT_TRUE(says(list_line(list, own.name), "built against LibTorch ")) << list;
  EXPECT_TRUE(says(list_line(list, own.name), std::string(" at ") + FLOTILLA_TORCH_DIR)) << list;
  EXPECT_TRUE(says(list_line(list, bundled.name), " bundled ")) << list;

  // A two-node DDP run: the first node's rank runs the engine built there.
  const auto file =
      control.write("ddp.yaml",
                    "name: own-engine\nmodel: small_cnn\ndataset: fashion_mnist\nstrategy: ddp\n"
                    "nodes: [" +
                        own.name + ", " + bundled.name +
                        "]\nranks_per_node: 1\nbatch_size: 32\nepochs: 1\nmax_steps: 30\n"
                        "threads: 1\n");
  const auto [ran, run_said] = control.flotilla({"run", file.string()}, 600s);
  ASSERT_EQ(ran, 0) << run_said;
  const auto run = run_id_in(run_said);
  std::map<std::string, std::string> engine_of;
  int64_t steps = 0;
  for (const auto& r : control.store().records(run)) {
    if (r.type == "start") engine_of[r.node] = json::parse(r.body).value("engine", "");
    steps += r.type == "step" ? 1 : 0;
  }
  EXPECT_EQ(steps, 60);
  EXPECT_TRUE(says(engine_of[own.name], "/engines/")) << engine_of[own.name];
  EXPECT_TRUE(says(engine_of[bundled.name], "/bundles/")) << engine_of[bundled.name];

  // A LibTorch that is not there is named, and the node keeps the bundle's engine.
  add(bundled, "no-torch", "/opt/no-such-libtorch");
  const auto [broken, broken_said] = control.flotilla({"nodes", "probe", "no-torch"}, 300s);
  EXPECT_NE(broken, 0) << broken_said;
  EXPECT_TRUE(says(broken_said,
                   "no-torch: its engine was not built: node no-torch: engine "
                   "build: no LibTorch at /opt/no-such-libtorch"))
      << broken_said;
  const auto [relisted, relist] = control.flotilla({"nodes", "list"});
  std::cout << broken_said << relist << std::endl;
  EXPECT_TRUE(says(list_line(relist, "no-torch"), "bundled (not built yet)")) << relist;
}

}  // namespace
}  // namespace flotilla::testing
