// The link roofline on real hosts: `flotilla nodes bench` over the three
// hosts of the test cluster (real SSH, Gloo over the namespaces' veths) stores
// a sweep whose figures are what it printed, and `flotilla compare` then puts
// a DDP run over those hosts against it.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cluster_control.h"
#include "flotilla/controller/link_bench.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::testing {
namespace {

using nlohmann::json;

const std::vector<std::string> kHosts{"flh1", "flh2", "flh3"};

// The printed sweep's rows by size text ("1 MiB"): time, algbw, busbw as printed.
std::map<std::string, std::vector<std::string>> printed_rows(const std::string& output) {
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    static const std::regex row(R"(^\s+([0-9]+ (?:B|KiB|MiB|GiB))\s+(\S+)\s+(\S+)\s+(\S+)\s*$)");
    std::smatch m;
    if (std::regex_match(line, m, row)) rows[m[1]] = {m[2], m[3], m[4]};
  }
  return rows;
}

json compare_json(const ClusterControl& control, const std::string& run) {
  const auto [status, output] =
      control.flotilla({"compare", run, "--format", "json", "--columns",
                        "run,ranks,busbw_gbps,link_busbw_gbps,link_util_pct"});
  EXPECT_EQ(status, 0) << output;
  return json::parse(output, nullptr, false);
}

TEST(ClusterBench, NodesBenchStoresTheSweepItPrintsAndCompareMeasuresADdpRunAgainstIt) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(3);
  ClusterControl control(cluster);

  // A DDP run over the three hosts, before any sweep of them: no utilisation, and why.
  const auto file = control.write("ddp.yaml", ddp_experiment("ddp3", 40));
  const auto [trained, training] = control.flotilla({"--trust-new-host-key", "run", file.string()});
  ASSERT_EQ(trained, 0) << training;
  const auto ddp = run_id_in(training);
  const auto before = compare_json(control, ddp);
  ASSERT_FALSE(before.is_discarded());
  EXPECT_GT(before["rows"][0]["values"]["busbw_gbps"].get<double>(), 0.0);
  EXPECT_TRUE(before["rows"][0]["values"]["link_util_pct"].is_null());
  const std::string warnings = before["warnings"].dump();
  EXPECT_NE(warnings.find("no link sweep of nodes flh1,flh2,flh3 yet"), std::string::npos)
      << warnings;

  // The sweep: 8 B to 4 MiB (above the small CNN's whole 1.7 MB gradient), one rank a host.
  const auto [benched, printed] =
      control.flotilla({"nodes", "bench", "flh1", "flh2", "flh3", "--max-bytes", "4194304",
                        "--iterations", "5", "--warmup", "2"});
  ASSERT_EQ(benched, 0) << printed;
  const auto bench_run = run_id_in(printed);
  ASSERT_FALSE(bench_run.empty()) << printed;
  const auto store = control.store();
  const auto rows = controller::link_benches(store, controller::node_set_key(kHosts));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].run_id, bench_run);
  EXPECT_EQ(rows[0].node_set, "flh1,flh2,flh3");
  EXPECT_EQ(rows[0].ranks_per_node, 1);
  EXPECT_EQ(rows[0].device, "cpu");
  EXPECT_EQ(rows[0].state, controller::RunState::finished);
  const auto points = controller::link_bench_points(store, bench_run);
  ASSERT_EQ(points.size(), 20u);  // 8 B, 16 B, ... 4 MiB
  const auto table = printed_rows(printed);
  EXPECT_EQ(table.size(), points.size()) << printed;
  int64_t bytes = 8;
  for (const auto& p : points) {
    EXPECT_EQ(p.bytes, bytes);
    bytes *= 2;
    EXPECT_EQ(p.ranks, 3);
    ASSERT_GT(p.time_us, 0.0);
    // nccl-tests' definitions: algbw = bytes / time, busbw = algbw x 2(P-1)/P.
    EXPECT_NEAR(p.algbw_gbps, double(p.bytes) / p.time_us / 1e3, 1e-9 * p.algbw_gbps + 1e-12);
    EXPECT_NEAR(p.busbw_gbps, p.algbw_gbps * 2.0 * (3 - 1) / 3, 1e-9 * p.busbw_gbps + 1e-12);
    // What was printed is what was stored.
    const auto row = table.find(controller::byte_size_text(double(p.bytes)));
    ASSERT_NE(row, table.end()) << p.bytes << " not printed:\n" << printed;
    EXPECT_EQ(row->second[0], format_fixed(p.time_us, 1)) << p.bytes;
    EXPECT_EQ(row->second[1], format_fixed(p.algbw_gbps, 3)) << p.bytes;
    EXPECT_EQ(row->second[2], format_fixed(p.busbw_gbps, 3)) << p.bytes;
  }
  // Then send/receive between ranks 0 and 1, one way, at the same sizes.
  // Idle, then with every rank computing beside it.
  for (const char* op : {"sendrecv", "sendrecv_computing"}) {
    SCOPED_TRACE(op);
    const auto p2p = controller::link_bench_points(store, bench_run, op);
    ASSERT_EQ(p2p.size(), points.size());
    for (size_t i = 0; i < p2p.size(); ++i) {
      EXPECT_EQ(p2p[i].bytes, points[i].bytes);
      EXPECT_EQ(p2p[i].ranks, 2);
      ASSERT_GT(p2p[i].time_us, 0.0);
      EXPECT_NEAR(p2p[i].algbw_gbps, double(p2p[i].bytes) / p2p[i].time_us / 1e3,
                  1e-9 * p2p[i].algbw_gbps + 1e-12);
    }
  }
  EXPECT_NE(printed.find("send/receive one way: "), std::string::npos) << printed;
  EXPECT_NE(printed.find("send/receive one way with every rank computing: "), std::string::npos)
      << printed;
  // And the all-reduce's sizes again with every rank computing beside it.
  const auto beside = controller::link_bench_points(store, bench_run, "allreduce_computing");
  ASSERT_EQ(beside.size(), points.size());
  for (size_t i = 0; i < beside.size(); ++i) {
    EXPECT_EQ(beside[i].bytes, points[i].bytes);
    EXPECT_EQ(beside[i].ranks, 3);
    ASSERT_GT(beside[i].time_us, 0.0);
    EXPECT_NEAR(beside[i].busbw_gbps, beside[i].algbw_gbps * 2.0 * (3 - 1) / 3,
                1e-9 * beside[i].busbw_gbps + 1e-12);
  }
  EXPECT_NE(printed.find("all-reduce with every rank computing: "), std::string::npos) << printed;
  // --show prints the same stored sweep without running anything.
  const auto [shown, again] =
      control.flotilla({"nodes", "bench", "--show", "flh1", "flh2", "flh3"});
  ASSERT_EQ(shown, 0) << again;
  EXPECT_EQ(printed_rows(again), table);

  // The DDP run against the sweep: its busbw as a share of the link's at its message size.
  const auto after = compare_json(control, ddp);
  ASSERT_FALSE(after.is_discarded());
  EXPECT_TRUE(after["warnings"].empty()) << after.dump();
  const auto& values = after["rows"][0]["values"];
  EXPECT_EQ(values["ranks"], 3);
  const double busbw = values["busbw_gbps"].get<double>();
  const double link = values["link_busbw_gbps"].get<double>();
  // Read off the sweep (interpolated between two swept sizes, so within its range).
  double lowest = points.front().busbw_gbps, highest = lowest;
  for (const auto& p : points) {
    lowest = std::min(lowest, p.busbw_gbps);
    highest = std::max(highest, p.busbw_gbps);
  }
  EXPECT_GE(link, lowest);
  EXPECT_LE(link, highest);
  EXPECT_DOUBLE_EQ(values["link_util_pct"].get<double>(), 100.0 * busbw / link);
}

// A run's blocks timed on a host over SSH (`flotilla nodes profile`): the
// host's own engine sends the profile, and a prediction of a run on the
// hosts takes its blocks' times from it.
TEST(ClusterProfile, NodesProfileTimesTheBlocksOnTheHostAndPredictionsOfRunsThereUseThem) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  ClusterControl control(cluster);
  const auto file = control.write("pipe.yaml",
                                  "name: profiled\nmodel: small_cnn\ndataset: fashion_mnist\n"
                                  "strategy: pipeline\nchunks: 4\nnodes: [flh1, flh2]\n"
                                  "batch_size: 64\nmax_steps: 4\nthreads: 1\n");
  const auto [status, printed] =
      control.flotilla({"--trust-new-host-key", "nodes", "profile", "flh1", file.string()});
  ASSERT_EQ(status, 0) << printed;
  // Timed by a rank on flh1 (the host name its namespace answers).
  EXPECT_NE(printed.find("micro-batch 16, 1 thread(s) of"), std::string::npos) << printed;
  EXPECT_NE(printed.find(" on flh1: 4 blocks"), std::string::npos) << printed;

  const auto [planned, plan] = control.flotilla({"plan", file.string(), "--predict"});
  ASSERT_EQ(planned, 0) << plan;
  EXPECT_NE(plan.find("blocks from node flh1's profile of"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("no block profile"), std::string::npos) << plan;
}

}  // namespace
}  // namespace flotilla::testing
