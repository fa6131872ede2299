// Checkpoints and resume across real hosts: a 2-node DDP run killed past
// step 300 goes on with `flotilla resume` from its newest checkpoint every
// node holds, and from there trains exactly as a run never interrupted.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "cluster_control.h"
#include "flotilla/controller/store.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;
using controller::RunState;
using nlohmann::json;

std::string two_node_experiment(const std::string& name) {
  return "name: " + name +
         "\nmodel: small_cnn\ndataset: fashion_mnist\nstrategy: ddp\nnodes: [flh1, flh2]\n"
         "ranks_per_node: 1\nbatch_size: 32\nepochs: 1\nmax_steps: 500\nthreads: 1\nseed: 7\n"
         "save: {every_steps: 100, keep: 2}\n";
}

// rank -> step -> the losses recorded for it, in the order stored (one per attempt).
std::map<int64_t, std::map<int64_t, std::vector<double>>> losses_of(const controller::Store& store,
                                                                    const std::string& run) {
  std::map<int64_t, std::map<int64_t, std::vector<double>>> losses;
  for (const auto& r : store.records(run)) {
    if (r.type != "step") continue;
    const auto body = json::parse(r.body);
    losses[r.rank][body.at("step").get<int64_t>()].push_back(body.at("loss").get<double>());
  }
  return losses;
}

int64_t last_step_of_rank0(const controller::Store& store, const std::string& run) {
  int64_t last = 0;
  for (const auto& r : store.records(run))
    if (r.type == "step" && r.rank == 0)
      last = std::max(last, json::parse(r.body).at("step").get<int64_t>());
  return last;
}

TEST(ClusterResume, AKilledTwoNodeDdpRunResumesAndTrainsExactlyAsAnUninterruptedOne) {
  SKIP_WITHOUT_CLUSTER();
  TestCluster cluster(2);
  ClusterControl control(cluster);

  const auto whole_file = control.write("whole.yaml", two_node_experiment("whole"));
  const auto [whole_status, whole_said] =
      control.flotilla({"--trust-new-host-key", "run", whole_file.string()});
  ASSERT_EQ(whole_status, 0) << whole_said;
  const auto whole_run = run_id_in(whole_said);
  const auto whole = losses_of(control.store(), whole_run);
  ASSERT_EQ(whole.at(0).size(), 500u);

  const auto cut_file = control.write("cut.yaml", two_node_experiment("cut"));
  auto runner = control.start({"run", cut_file.string()}, "cut.txt");
  std::string run;
  const auto deadline = std::chrono::steady_clock::now() + 300s;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& r : control.store().runs())
      if (r.id != whole_run) run = r.id;
    if (!run.empty() && last_step_of_rank0(control.store(), run) >= 300) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(run.empty()) << runner->output();
  const auto [killed, kill_said] = control.flotilla({"kill", run, "--grace", "2"});
  ASSERT_EQ(killed, 0) << kill_said;
  ASSERT_TRUE(runner->wait(60s));
  ASSERT_EQ(control.store().run(run)->state, RunState::killed);
  const int64_t killed_after = last_step_of_rank0(control.store(), run);
  ASSERT_LT(killed_after, 500) << "the run ended before the kill; nothing to resume";

  const auto [resumed, resume_said] = control.flotilla({"resume", run});
  ASSERT_EQ(resumed, 0) << resume_said;
  EXPECT_NE(resume_said.find("attempt 2"), std::string::npos) << resume_said;
  const auto store = control.store();
  EXPECT_EQ(store.run(run)->state, RunState::finished);
  // Where each rank went on from: the newest checkpoint both nodes hold.
  std::map<int64_t, int64_t> resumed_from;
  for (const auto& r : store.records(run))
    if (r.type == "start") {
      const auto body = json::parse(r.body);
      if (body.contains("resumed_from_step"))
        resumed_from[r.rank] = body["resumed_from_step"].get<int64_t>();
    }
  ASSERT_EQ(resumed_from.size(), 2u);
  EXPECT_EQ(resumed_from[0], resumed_from[1]);
  EXPECT_EQ(resumed_from[0] % 100, 0);
  EXPECT_GE(resumed_from[0], 200);
  EXPECT_LE(resumed_from[0], killed_after);
  std::cout << "killed after step " << killed_after << ", resumed from step " << resumed_from[0]
            << std::endl;

  // Every step of both attempts lost exactly what the uninterrupted run lost.
  const auto cut = losses_of(store, run);
  for (int64_t rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(cut.at(rank).size(), 500u) << "rank " << rank << " misses steps";
    for (const auto& [step, losses] : cut.at(rank))
      for (double loss : losses)
        ASSERT_EQ(loss, whole.at(rank).at(step).front()) << "rank " << rank << " step " << step;
    // The steps after the checkpoint and before the kill were trained twice.
    EXPECT_EQ(cut.at(rank).at(resumed_from[0] + 1).size(), 2u) << rank;
  }
}

}  // namespace
}  // namespace flotilla::testing
