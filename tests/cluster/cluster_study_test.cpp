// Seed 003's study on real hosts: vgg-freeze-traffic over the three
// namespace hosts in one command (`study run … --nodes`), and each node's
// traffic per epoch, read from its own interface counters, against what a
// ring all-reduce of the run's payload puts on the wire.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cluster_control.h"
#include "flotilla/controller/study.h"
#include "flotilla/controller/sweep_store.h"
#include "flotilla/protocol/run_statistics.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// The carried study as it is, smaller: 4 steps an epoch instead of 16 and
// the frozen axis at its ends (0 and 3 blocks), so that it fits a test.
std::string smaller_vgg_study() {
  auto spec = controller::load_study("vgg-freeze-traffic", "cpu");
  auto base = json::parse(spec.base_json);
  base["synthetic"]["train_samples"] = 384;  // 4 steps of 3 ranks x 32
  base["synthetic"]["test_samples"] = 48;
  spec.base_json = base.dump();
  auto& frozen = spec.axes.at(0);
  EXPECT_EQ(frozen.key, "frozen");
  frozen.values = {frozen.values.front(), frozen.values.back()};
  frozen.variants = {frozen.variants.front(), frozen.variants.back()};
  return sweep_to_json(spec);
}

struct NodeEpoch {
  int64_t rank = -1, epoch = -1, rx = 0, tx = 0;
  double wire = 0;  // what the rank's steps of that epoch put on the wire, by the ring's rule
};

TEST(ClusterStudy, VggFreezeTrafficRunsOnThreeHostsInOneCommandAndEachNodeMovesTheRingsBytes) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);
  const auto file = control.write("vgg-freeze-traffic.json", smaller_vgg_study());
  const auto report = file.parent_path() / "report";
  const auto [status, output] =
      control.flotilla({"--trust-new-host-key", "study", "run", file.string(), "--nodes",
                        "flh1,flh2,flh3", "-o", report.string()},
                       600s);
  ASSERT_EQ(status, 0) << output;

  auto store = control.store();
  const auto sweeps = controller::SweepStore(store).sweeps();
  ASSERT_EQ(sweeps.size(), 1u);
  const auto points = controller::SweepStore(store).points(sweeps[0].id);
  ASSERT_EQ(points.size(), 2u);
  std::vector<double> payloads;
  for (const auto& point : points) {
    ASSERT_FALSE(point.run_id.empty()) << point.values_json;
    const auto run = store.run(point.run_id);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, controller::RunState::finished) << point.values_json;
    EXPECT_EQ(run->world_size, 3) << "on_nodes puts one rank on each node";
    // Each node's epoch records: the last epoch's NIC reading, and the ring's
    // bytes of the same rank's steps in that epoch.
    std::map<std::string, NodeEpoch> nodes;
    std::vector<std::pair<std::string, json>> steps;
    for (const auto& r : store.records(point.run_id)) {
      if (r.type == "step") steps.emplace_back(r.node, json::parse(r.body));
      if (r.type != "epoch") continue;
      const auto e = json::parse(r.body);
      ASSERT_TRUE(e.contains("nic_rx_bytes")) << r.body;
      auto& kept = nodes[r.node];
      if (e["epoch"].get<int64_t>() > kept.epoch)
        kept = {r.rank, e["epoch"].get<int64_t>(), e["nic_rx_bytes"].get<int64_t>(),
                e["nic_tx_bytes"].get<int64_t>(), 0};
    }
    ASSERT_EQ(nodes.size(), 3u) << point.values_json;
    double payload = 0;
    for (const auto& [node, step] : steps) {
      auto& n = nodes.at(node);
      EXPECT_EQ(step["rank"].get<int64_t>(), n.rank) << "one rank a node";
      if (step["epoch"].get<int64_t>() != n.epoch) continue;
      payload = step["bytes_sent"].get<double>();
      n.wire += metrics::ring_allreduce_bytes(payload, 3);
    }
    payloads.push_back(payload);
    for (const auto& [node, n] : nodes) {
      ASSERT_GT(n.wire, 0) << node;
      std::cout << point.values_json << " " << node << ": rx " << n.rx / 1e6 << " MB, tx "
                << n.tx / 1e6 << " MB, the ring's 2(P-1)/P x payload " << n.wire / 1e6 << " MB"
                << std::endl;
      EXPECT_LE(std::abs(n.rx / n.wire - 1), 0.02) << node << " rx " << n.rx << " of " << n.wire;
      EXPECT_LE(std::abs(n.tx / n.wire - 1), 0.02) << node << " tx " << n.tx << " of " << n.wire;
    }
  }
  EXPECT_LT(payloads.back(), payloads.front()) << "three frozen blocks all-reduce less";

  // The report's per-node column is the same reading, node by node.
  std::ifstream in(report / "report.md");
  const std::string markdown{std::istreambuf_iterator<char>(in), {}};
  EXPECT_NE(markdown.find("NIC rx/tx MB per epoch per node"), std::string::npos);
  for (const char* node : {"flh1 ", "flh2 ", "flh3 "})
    EXPECT_NE(markdown.find(node), std::string::npos) << node;
  EXPECT_NE(markdown.find("--nodes flh1,flh2,flh3"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::testing
