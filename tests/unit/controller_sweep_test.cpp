// Sweeps in the database: points stored as a queue, claimed once, owned by
// one live controller, skipped after an OOM, killed; and the nodes' check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QString>
#include <QSysInfo>
#include <atomic>
#include <thread>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/sweep_runner.h"
#include "flotilla/controller/sweep_store.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using testing::TempDir;

QString db_in(const TempDir& dir) {
  return QString::fromStdString((dir.path() / "flotilla.db").string());
}

SweepSpec ladder_spec(const std::string& name = "ladder") {
  return parse_sweep("name: " + name + R"(
base:
  model: small_cnn
  dataset: synthetic
  synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 16}
axes:
  batch_size: {values: [8, 16, 32, 64], until: oom}
  strategy: [single, pipeline]
)");
}

// A sweep stored with `owner`, its points read back.
struct StoredSweep {
  int64_t id = 0;
  std::vector<SweepPointRow> points;
};
StoredSweep store_sweep(SweepStore& sweeps, const SweepSpec& spec, const std::string& owner) {
  StoredSweep s;
  s.id = sweeps.create(spec, expand_sweep(spec), "ladder.yaml", owner);
  s.points = sweeps.points(s.id);
  return s;
}

std::vector<PointState> states_of(const std::vector<SweepPointRow>& points) {
  std::vector<PointState> states;
  for (const auto& p : points) states.push_back(p.state);
  return states;
}

TEST(SweepStore, StoresEveryPointQueuedOrRefusedWithTheValidatorsWords) {
  TempDir dir;
  Store store(db_in(dir));
  SweepStore sweeps(store);
  const auto s = store_sweep(sweeps, ladder_spec(), "me");
  ASSERT_EQ(s.points.size(), 8u);
  using P = PointState;
  // single runs; a pipeline on one rank is refused.
  EXPECT_EQ(states_of(s.points), (std::vector<P>{P::queued, P::refused, P::queued, P::refused,
                                                 P::queued, P::refused, P::queued, P::refused}));
  EXPECT_NE(s.points[1].reason.find("needs at least 2 stages"), std::string::npos);
  EXPECT_TRUE(s.points[1].config_json.empty());
  EXPECT_EQ(s.points[2].values_json, R"({"batch_size":16,"strategy":"single"})");
  EXPECT_EQ(s.points[2].coords, (std::vector<int64_t>{1, 0}));
  const auto row = sweeps.sweep("ladder");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, SweepState::running);
  EXPECT_EQ(row->owner, "me");
  EXPECT_EQ(row->source, "ladder.yaml");
  EXPECT_EQ(parse_sweep(row->spec_json, "stored").axes.size(), 2u);
  // A second sweep of the same name is refused; nothing of the first is lost.
  EXPECT_THROW(sweeps.create(ladder_spec(), expand_sweep(ladder_spec()), "", "me"), StoreError);
  EXPECT_EQ(sweeps.points(s.id).size(), 8u);
  EXPECT_EQ(sweeps.sweeps().size(), 1u);
}

TEST(SweepStore, APointIsClaimedOnceEvenByTwoProcessesConnectionsAtOnce) {
  TempDir dir;
  int64_t id = 0;
  {
    Store store(db_in(dir));
    SweepStore sweeps(store);
    id = store_sweep(sweeps, ladder_spec(), "owner").id;
  }
  // Two stores on one file: two writers, as two controller processes have.
  Store first(db_in(dir)), second(db_in(dir));
  for (int64_t index : {0, 2, 4, 6}) {
    std::atomic<int> claimed{0};
    std::thread a([&] { claimed += SweepStore(first).claim(id, index, "run-a", "owner"); });
    std::thread b([&] { claimed += SweepStore(second).claim(id, index, "run-b", "owner"); });
    a.join();
    b.join();
    EXPECT_EQ(claimed, 1) << "point " << index;
  }
  // Not queued any more, refused, or claimed by a controller that does not own it: no.
  SweepStore sweeps(first);
  EXPECT_FALSE(sweeps.claim(id, 0, "run-c", "owner"));
  EXPECT_FALSE(sweeps.claim(id, 1, "run-c", "owner"));
  const auto points = sweeps.points(id);
  EXPECT_EQ(points[0].state, PointState::running);
  EXPECT_TRUE(points[0].run_id == "run-a" || points[0].run_id == "run-b") << points[0].run_id;
  EXPECT_TRUE(points[0].started_ms.has_value());
}

TEST(SweepStore, OnlyTheOwnerClaimsAndARequeuedPointCanBeClaimedAgain) {
  TempDir dir;
  Store store(db_in(dir));
  SweepStore sweeps(store);
  const auto id = store_sweep(sweeps, ladder_spec(), "owner").id;
  EXPECT_FALSE(sweeps.claim(id, 0, "run-x", "someone else"));
  ASSERT_TRUE(sweeps.claim(id, 0, "run-1", "owner"));
  EXPECT_TRUE(sweeps.requeue(id, 0));
  EXPECT_EQ(sweeps.points(id)[0].run_id, "");
  EXPECT_FALSE(sweeps.requeue(id, 0));  // queued already
  EXPECT_TRUE(sweeps.claim(id, 0, "run-2", "owner"));
  EXPECT_EQ(sweeps.points(id)[0].run_id, "run-2");
}

TEST(SweepStore, OwnershipGoesToANewControllerOnlyWhenTheOwnerIsGone) {
  TempDir dir;
  Store store(db_in(dir));
  SweepStore sweeps(store);
  const std::string me = new_owner_identity();
  const auto id = store_sweep(sweeps, ladder_spec(), me).id;
  EXPECT_TRUE(owner_alive(me, now_ms()));
  const std::string other = new_owner_identity();
  EXPECT_NE(other, me);
  std::string holder;
  EXPECT_FALSE(sweeps.take_ownership(id, other, owner_alive, &holder));
  EXPECT_EQ(holder, me);
  EXPECT_TRUE(sweeps.take_ownership(id, me, owner_alive));  // the owner itself: yes
  sweeps.release_ownership(id, me);
  EXPECT_TRUE(sweeps.take_ownership(id, other, owner_alive));
  EXPECT_FALSE(sweeps.renew_ownership(id, me));
  EXPECT_TRUE(sweeps.renew_ownership(id, other));

  // A controller on this host whose process has gone (the pid's start time differs).
  const std::string gone =
      QSysInfo::machineHostName().toStdString() + " " + std::to_string(::getpid()) + " 1 dead";
  EXPECT_FALSE(owner_alive(gone, now_ms()));
  // On another host: alive while it renews within the lease.
  EXPECT_TRUE(owner_alive("elsewhere 42 100 x", now_ms() - 1000));
  EXPECT_FALSE(owner_alive("elsewhere 42 100 x", now_ms() - 10 * 60 * 1000));
}

TEST(SweepStore, AnOomSkipsTheLargerBatchesOfTheSameOtherValues) {
  TempDir dir;
  Store store(db_in(dir));
  SweepStore sweeps(store);
  const auto spec = ladder_spec();
  const auto s = store_sweep(sweeps, spec, "owner");
  ASSERT_TRUE(sweeps.claim(s.id, 2, "run-16", "owner"));  // batch 16, single
  ASSERT_TRUE(sweeps.end_point(s.id, 2, PointState::oom, "out of memory (batch_size 16)"));
  std::vector<std::vector<int64_t>> coords;
  for (const auto& p : s.points) coords.push_back(p.coords);
  const auto skipped = sweeps.skip(s.id, dropped_after_oom(spec.axes, coords, 2));
  EXPECT_EQ(skipped,
            (std::vector<int64_t>{4, 6}));  // batch 32 and 64, single; the pipelines are refused
  const auto points = sweeps.points(s.id);
  using P = PointState;
  EXPECT_EQ(states_of(points), (std::vector<P>{P::queued, P::refused, P::oom, P::refused,
                                               P::skipped, P::refused, P::skipped, P::refused}));
  EXPECT_EQ(points[4].reason, "oom at batch_size 16");
  EXPECT_EQ(points[2].reason, "out of memory (batch_size 16)");
  EXPECT_FALSE(sweeps.finish_if_done(s.id));  // point 0 is still queued
  ASSERT_TRUE(sweeps.claim(s.id, 0, "run-8", "owner"));
  EXPECT_FALSE(sweeps.finish_if_done(s.id));  // and now running
  ASSERT_TRUE(sweeps.end_point(s.id, 0, PointState::finished, ""));
  EXPECT_FALSE(sweeps.end_point(s.id, 0, PointState::failed, "again"));  // ended once only
  EXPECT_TRUE(sweeps.finish_if_done(s.id));
  const auto row = sweeps.sweep("ladder");
  EXPECT_EQ(row->state, SweepState::finished);
  EXPECT_EQ(row->owner, "");
  EXPECT_TRUE(row->ended_ms.has_value());
  const auto progress = progress_of(points);
  EXPECT_EQ(progress.total, 8);
  EXPECT_EQ(progress.refused, 4);
  EXPECT_EQ(progress.skipped, 2);
}

TEST(SweepStore, KillSkipsTheQueuedPointsAndStopsClaims) {
  TempDir dir;
  Store store(db_in(dir));
  SweepStore sweeps(store);
  const auto s = store_sweep(sweeps, ladder_spec(), "owner");
  ASSERT_TRUE(sweeps.claim(s.id, 0, "run-8", "owner"));
  EXPECT_TRUE(sweeps.kill(s.id, "killed on request"));
  EXPECT_FALSE(sweeps.kill(s.id, "again"));
  EXPECT_FALSE(sweeps.claim(s.id, 2, "run-16", "owner"));
  const auto points = sweeps.points(s.id);
  EXPECT_EQ(points[0].state, PointState::running);  // its run is killed by the kill command
  EXPECT_EQ(points[2].state, PointState::skipped);
  EXPECT_EQ(points[2].reason, "the sweep was killed");
  EXPECT_EQ(points[1].state, PointState::refused);  // refused stays refused
  EXPECT_EQ(sweeps.sweep("ladder")->state, SweepState::killed);
  EXPECT_EQ(sweeps.sweep("ladder")->reason, "killed on request");
  EXPECT_FALSE(sweeps.finish_if_done(s.id));
}

TEST(SweepHosting, RefusesMoreCudaRanksThanTheNodesProbeFoundGpus) {
  TempDir dir;
  Store store(db_in(dir));
  NodeRow node;
  node.name = "gpu1";
  node.host = "10.0.0.1";
  store.add_node(node);
  // A probe as the agent answers it, stored as `flotilla nodes probe` stores it.
  store.save_probe("gpu1",
                   R"({"os":"Debian GNU/Linux 12","kernel":"Linux 6.1","hostname":"g1","cpus":32,)"
                   R"("memory_bytes":1,"disk_free_bytes":1,"free_port":0,)"
                   R"("gpus":[{"index":0,"name":"A","memory_bytes":1},)"
                   R"({"index":1,"name":"A","memory_bytes":1}]})");
  NodeRow unprobed = node;
  unprobed.name = "gpu2";
  store.add_node(unprobed);
  ControllerOptions options;
  options.agent_binary = "/nonexistent/flotilla-agent";  // nothing is started here
  Controller controller(store, options);
  auto config = parse_experiment(
      "name: g\nmodel: small_cnn\ndataset: synthetic\ndevice: cuda\nstrategy: ddp\n"
      "ranks_per_node: 4\nnodes: [gpu1, gpu2]\n");
  const auto too_few = controller.hosting_problems(config);
  ASSERT_EQ(too_few.size(), 1u);
  EXPECT_NE(too_few[0].find("node \"gpu1\" has 2 GPUs"), std::string::npos) << too_few[0];
  config.ranks_per_node = 2;
  EXPECT_TRUE(controller.hosting_problems(config).empty());
  config.device = DeviceKind::cpu;
  config.ranks_per_node = 4;
  EXPECT_TRUE(controller.hosting_problems(config).empty());  // CPU ranks need no GPU
  config.nodes = {"gpu1", "mars"};
  EXPECT_EQ(
      controller.hosting_problems(config),
      (std::vector<std::string>{"nodes: \"mars\" is not a known node (known: gpu1,gpu2,local)"}));
}

}  // namespace
}  // namespace flotilla::controller
