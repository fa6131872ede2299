// The step and memory predicted before a run (flotilla-train --plan
// --predict, docs/predict.md) against the engine's own objects: the replayed
// schedules on timed blocks, the link bench, cores shared by ranks (timed in
// processes and in threads), this machine's kept profile, each rank's peak
// memory and the allocator count it rests on. The arithmetic alone:
// engine_step_prediction_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "plan/plan_prediction.h"
#include "plan/process_sharing.h"
#include "plan/run_plan.h"
#include "plan/tensor_memory.h"
#include "runtime/thread_pools.h"
#include "temp_dir.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

ExperimentConfig small_cnn(const std::string& layout) {
  return parse_experiment(R"(
model: small_cnn
dataset: synthetic
synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 32}
batch_size: 16
threads: 1
)" + layout);
}

// A link bench as the controller hands it over: busbw 0.5 GB/s at every size.
std::string slow_links() {
  return R"({"source": "bench of a,b", "ranks": 2, "measured_ms": 0, "allreduce": [
    {"bytes": 1024, "time_us": 40, "busbw_gbps": 0.5},
    {"bytes": 67108864, "time_us": 134217.7, "busbw_gbps": 0.5}]})";
}

// What a plan with these options refuses, in its ConfigError's words; "" when
// it takes them.
std::string refusal(const std::string& layout, const PlanOptions& options) {
  try {
    make_run_plan(small_cnn(layout), options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RunPlanPrediction, APipelinesStepIsItsScheduleReplayedOnTheTimedStages) {
  PlanOptions options;
  options.predict = true;
  const auto plan =
      make_run_plan(small_cnn("strategy: pipeline\nnodes: [a, b]\nchunks: 2\n"), options);
  ASSERT_TRUE(plan.prediction);
  const auto& p = *plan.prediction;
  EXPECT_EQ(plan.balance_source, "measured");  // as rank 0 would cut it
  EXPECT_EQ(p.micro_batch, 8);
  EXPECT_EQ(p.samples_per_step, 16);
  ASSERT_EQ(p.stages.size(), 2u);
  predict::PipelineInputs in;
  in.micro_batches = 2;
  for (const auto& stage : p.stages) {
    EXPECT_GT(stage.forward_ms, 0.0);
    EXPECT_GT(stage.backward_ms, 0.0);
    in.stages.push_back({stage.forward_ms, stage.backward_ms, stage.optimizer_ms, 0});
  }
  in.boundary_bytes = {0};
  EXPECT_DOUBLE_EQ(p.step.step_ms, predict::predict_pipeline(in).step_ms);
  EXPECT_DOUBLE_EQ(p.samples_per_s, 16 / (p.step.step_ms / 1000));
  EXPECT_GE(p.step.step_ms, p.step.compute_ms);
  EXPECT_TRUE(p.links.empty());
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes.front().find("no link bench"), std::string::npos) << p.notes.front();
}

TEST(RunPlanPrediction, DdpAllReducesEachBucketAtTheBenchsBandwidth) {
  PlanOptions options;
  options.predict = true;
  options.links_json = slow_links();
  const auto plan = make_run_plan(small_cnn("strategy: ddp\nnodes: [a, b]\n"), options);
  ASSERT_TRUE(plan.prediction);
  const auto& p = *plan.prediction;
  EXPECT_EQ(p.links, "bench of a,b");
  for (const auto& note : p.notes) EXPECT_EQ(note.find("no link bench"), std::string::npos);
  ASSERT_EQ(p.stages.size(), 1u);
  const auto& allreduce = *plan.stages.front().allreduce;
  // Two ranks: a ring moves the bucket once each way, at 0.5 GB/s.
  double expected_ms = 0;
  for (int64_t bytes : allreduce.bucket_bytes) expected_ms += double(bytes) / 0.5e9 * 1e3;
  EXPECT_NEAR(p.stages.front().allreduce_ms, expected_ms, 1e-9 * expected_ms);
  EXPECT_GT(expected_ms, 0.0);
  // The last bucket (the first blocks' gradients) cannot overlap the backward.
  const auto& stage = p.stages.front();
  EXPECT_GT(p.step.step_ms, stage.forward_ms + stage.backward_ms + stage.optimizer_ms);
  EXPECT_DOUBLE_EQ(p.samples_per_s, 32 / (p.step.step_ms / 1000));
}

// Nodes whose bench ranks said one boot id are one machine: their ranks
// share its cores. The slowdown is measured here and the step replayed with
// it; with the ranks' threads filling the cores, the all-reduces follow the
// backward. Nodes of other machines, or ranks of a GPU, share nothing.
TEST(RunPlanPrediction, NodesOfOneMachineShareItsCoresInTheStep) {
  testing::TempDir dir;
  PlanOptions options;
  options.predict = true;
  options.profile_dir = (dir.path() / "profiles").string();
  auto links = nlohmann::json::parse(slow_links());
  links["nodes"] = {{"a", {{"machine", "boot-1"}, {"cores", 2}}},
                    {"b", {{"machine", "boot-1"}, {"cores", 2}}}};
  options.links_json = links.dump();
  const auto shared = make_run_plan(small_cnn("strategy: ddp\nnodes: [a, b]\n"), options);
  ASSERT_TRUE(shared.prediction);
  const auto& p = *shared.prediction;
  EXPECT_EQ(p.ranks_sharing_cores, 2);
  // Measured for 1 and 2 at once and kept in this machine's profile; the
  // next plan of the same blocks reads it instead of measuring again.
  const auto kept = nlohmann::json::parse(std::ifstream(p.profile_file));
  ASSERT_EQ(kept.at("core_sharing").size(), 2u) << kept.dump();
  EXPECT_DOUBLE_EQ(kept["core_sharing"][0].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(p.core_sharing_slowdown, std::max(1.0, kept["core_sharing"][1].get<double>()));
  const auto again = make_run_plan(small_cnn("strategy: ddp\nnodes: [a, b]\n"), options);
  EXPECT_EQ(again.prediction->block_costs, "profile");
  EXPECT_DOUBLE_EQ(again.prediction->core_sharing_slowdown, p.core_sharing_slowdown);
  const auto& stage = p.stages.front();
  EXPECT_NEAR(p.step.compute_ms,
              p.core_sharing_slowdown * (stage.forward_ms + stage.backward_ms + stage.optimizer_ms),
              1e-6 * p.step.compute_ms);
  EXPECT_NEAR(p.step.step_ms, p.step.compute_ms + stage.allreduce_ms, 1e-6 * p.step.step_ms);
  bool said = false;
  for (const auto& note : p.notes)
    said = said || note.find("2 ranks share one machine") != std::string::npos;
  EXPECT_TRUE(said);

  // With the bench's all-reduce beside compute (here half the idle busbw),
  // the buckets that wait for the backward take that sweep's time: twice.
  links["allreduce_computing"] = {
      {{"bytes", 1024}, {"time_us", 80}, {"busbw_gbps", 0.25}},
      {{"bytes", 67108864}, {"time_us", 268435.4}, {"busbw_gbps", 0.25}}};
  options.links_json = links.dump();
  const auto beside =
      *make_run_plan(small_cnn("strategy: ddp\nnodes: [a, b]\n"), options).prediction;
  EXPECT_NEAR(beside.stages.front().allreduce_ms, 2 * stage.allreduce_ms,
              1e-9 * stage.allreduce_ms);
  EXPECT_NEAR(beside.step.step_ms, beside.step.compute_ms + 2 * stage.allreduce_ms,
              1e-6 * beside.step.step_ms);
  said = false;
  for (const auto& note : beside.notes)
    said = said || note.find("all-reduce beside compute") != std::string::npos;
  EXPECT_TRUE(said);

  // Ranks of separate machines all-reduce on idle cores: the idle sweep.
  links["nodes"]["b"]["machine"] = "boot-2";
  options.links_json = links.dump();
  const auto apart = make_run_plan(small_cnn("strategy: ddp\nnodes: [a, b]\n"), options);
  EXPECT_EQ(apart.prediction->ranks_sharing_cores, 1);
  EXPECT_DOUBLE_EQ(apart.prediction->core_sharing_slowdown, 1.0);
  EXPECT_NEAR(apart.prediction->stages.front().allreduce_ms, stage.allreduce_ms,
              1e-9 * stage.allreduce_ms);
  // Two ranks of one node share it, bench or not.
  const auto one_node = make_run_plan(small_cnn("strategy: ddp\nranks_per_node: 2\n"), options);
  EXPECT_EQ(one_node.prediction->ranks_sharing_cores, 2);

  links["nodes"]["b"] = {{"machine", ""}, {"cores", 2}};
  options.links_json = links.dump();
  options.links_origin = "links.json";
  const auto refused = refusal("strategy: ddp\nnodes: [a, b]\n", options);
  EXPECT_NE(refused.find("links.json: nodes.b.machine"), std::string::npos)
      << "a node without a machine: " << refused;
}

// Core sharing is timed with the engine itself: each of n one-rank
// trainings computes what one rank of the run computes, alone on this machine.
// A pipeline of two stages with a given balance, two micro-batches.
ExperimentConfig two_stage_pipeline() {
  return small_cnn("strategy: pipeline\nnodes: [a, b]\nbalance: [2, 2]\nchunks: 2\n");
}

TEST(CoreSharingInProcesses, EachTrainingIsOneRankOfTheRunAlone) {
  const auto run = two_stage_pipeline();
  const auto alone = one_rank_alone(run, 5, 1, 40);
  EXPECT_TRUE(validate(alone).empty()) << validate(alone).front();
  EXPECT_EQ(alone.world_size(), 1);
  EXPECT_EQ(alone.strategy, Strategy::single);
  EXPECT_EQ(alone.batch_size, 5);
  EXPECT_EQ(alone.max_steps, 40);
  EXPECT_EQ(alone.threads, 1);
  EXPECT_EQ(alone.model, run.model);
  EXPECT_EQ(alone.optimizer.lr, run.optimizer.lr);
  EXPECT_EQ(alone.precision, run.precision);
  EXPECT_TRUE(alone.balance.empty()) << "one stage: no cut";
}

TEST(CoreSharingInProcesses, AnEngineThatDoesNotTrainIsNamedWithItsOwnWords) {
  const auto alone = one_rank_alone(two_stage_pipeline(), 5, 1, 8);
  try {
    measure_core_sharing_in_processes("/bin/sh", alone, 2, 30);
    FAIL() << "a shell is no engine";
  } catch (const std::runtime_error& e) {
    const std::string said = e.what();
    EXPECT_NE(said.find("ended after 0 of 8 steps: "), std::string::npos) << said;
    EXPECT_EQ(said.find("nothing on stderr"), std::string::npos) << "sh's complaint: " << said;
  }
  EXPECT_EQ(measure_core_sharing_in_processes("/bin/sh", alone, 1), std::vector<double>{1.0})
      << "one rank alone shares nothing and starts nothing";
}

// An engine that cannot train alone does not cost the prediction: the
// slowdown is timed in threads instead, and the plan says why.
TEST(CoreSharingInProcesses, AFailedTrainingLeavesThePredictionTimedInThreadsWithTheReason) {
  testing::TempDir dir;
  PlanOptions options;
  options.predict = true;
  options.profile_dir = (dir.path() / "profiles").string();
  options.engine_binary = "/bin/sh";
  const auto plan = make_run_plan(small_cnn("strategy: ddp\nranks_per_node: 2\n"), options);
  ASSERT_TRUE(plan.prediction);
  EXPECT_EQ(plan.prediction->ranks_sharing_cores, 2);
  const auto& notes = plan.prediction->notes;
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& note) {
    return note.find("core sharing: the engine's one-rank training ended after 0 of") == 0 &&
           note.find("; timed in threads of the planner instead") != std::string::npos;
  })) << ::testing::PrintToString(notes);
  const auto kept = nlohmann::json::parse(std::ifstream(plan.prediction->profile_file));
  EXPECT_EQ(kept.at("core_sharing_by"), "threads");
  EXPECT_EQ(kept.at("core_sharing").size(), 2u);
}

TEST(RunPlanPrediction, ALinksFileThatIsNotABenchIsRefusedNamingTheField) {
  PlanOptions options;
  options.predict = true;
  options.links_origin = "links.json";
  options.links_json =
      R"({"ranks": 2, "allreduce": [{"bytes": 1024, "time_us": 40, "busbw_gbps": 0}]})";
  const auto refused = refusal("strategy: ddp\nnodes: [a, b]\n", options);
  EXPECT_NE(refused.find("links.json: allreduce[0].busbw_gbps"), std::string::npos)
      << "a busbw of 0: " << refused;
  options.links_json =
      R"({"ranks": 2, "allreduce": [{"bytes": 1024, "time_us": 40, "busbw_gbps": 1}],
          "p2p": [{"bytes": 1024}]})";
  const auto no_time = refusal("strategy: ddp\nnodes: [a, b]\n", options);
  EXPECT_NE(no_time.find("links.json: p2p[0].time_us"), std::string::npos) << no_time;
  options.links_json =
      R"({"ranks": 2, "allreduce": [{"bytes": 1024, "time_us": 40, "busbw_gbps": 1}],
          "allreduce_computing": [{"bytes": 1024, "time_us": 90}]})";
  const auto no_busbw = refusal("strategy: ddp\nnodes: [a, b]\n", options);
  EXPECT_NE(no_busbw.find("links.json: allreduce_computing[0].busbw_gbps"), std::string::npos)
      << no_busbw;
}

// A crossing of a pipeline's boundary takes what the bench's send/receive
// sweep measured at its size, in log size between two measured sizes and
// at the largest's bandwidth beyond; without that sweep, the all-reduce's.
TEST(RunPlanPrediction, ACrossingTakesTheSendReceiveTimeAtItsSize) {
  const auto links = parse_link_measurements(
      R"({"ranks": 2, "allreduce": [{"bytes": 1000, "time_us": 4000, "busbw_gbps": 0.001}],
          "p2p": [{"bytes": 1000, "time_us": 100}, {"bytes": 100000, "time_us": 300}]})",
      "links.json");
  EXPECT_DOUBLE_EQ(links.link_for(1000).time_ms(1000), 0.1);
  EXPECT_DOUBLE_EQ(links.link_for(500).time_ms(500), 0.1);        // held below the smallest
  EXPECT_NEAR(links.link_for(10000).time_ms(10000), 0.2, 1e-12);  // halfway in log size
  EXPECT_DOUBLE_EQ(links.link_for(200000).time_ms(200000), 0.6);
  const auto without = parse_link_measurements(
      R"({"ranks": 2, "allreduce": [{"bytes": 1000, "time_us": 4000, "busbw_gbps": 0.001}]})",
      "links.json");
  // 2 hops of a 4 ms all-reduce, then 1000 bytes at 1 MB/s.
  EXPECT_DOUBLE_EQ(without.link_for(1000).time_ms(1000), 2.0 + 1.0);
  // A pipeline's crossing: the idle sweep, where there is no other.
  EXPECT_DOUBLE_EQ(links.crossing_for(1000).time_ms(1000), 0.1);
}

// A pipeline's stages compute while their activations cross, and on CPU a
// transfer then waits for cores: its crossings take the sweep timed with
// every rank computing beside it, when the bench has one, at their size.
TEST(RunPlanPrediction, ACrossingTakesTheSendReceiveTimedBesideCompute) {
  const auto links = parse_link_measurements(
      R"({"ranks": 2, "allreduce": [{"bytes": 1000, "time_us": 4000, "busbw_gbps": 0.001}],
          "p2p": [{"bytes": 1000, "time_us": 100}, {"bytes": 100000, "time_us": 300}],
          "p2p_computing": [{"bytes": 1000, "time_us": 900}, {"bytes": 100000, "time_us": 1500}]})",
      "links.json");
  EXPECT_DOUBLE_EQ(links.link_for(1000).time_ms(1000), 0.1) << "the idle figure stays";
  EXPECT_DOUBLE_EQ(links.crossing_for(1000).time_ms(1000), 0.9);
  EXPECT_NEAR(links.crossing_for(10000).time_ms(10000), 1.2, 1e-12);  // halfway in log size
  const auto refused = [](const std::string& json) {
    try {
      parse_link_measurements(json, "links.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const auto said = refused(
      R"({"ranks": 2, "allreduce": [{"bytes": 1000, "time_us": 4000, "busbw_gbps": 0.001}],
          "p2p_computing": [{"bytes": 1000, "time_us": -1}]})");
  EXPECT_NE(said.find("links.json: p2p_computing[0].time_us: expected a positive number"),
            std::string::npos)
      << said;
}

// This machine's profile of the blocks is kept and reused: the same blocks
// at the same micro-batch are not timed again, another micro-batch is, a
// profile that does not read as one is measured again, and --remeasure
// replaces it.
TEST(RunPlanPrediction, ASecondPredictionOfTheSameBlocksReusesThisMachinesProfile) {
  testing::TempDir dir;
  PlanOptions options;
  options.predict = true;
  options.profile_dir = (dir.path() / "profiles").string();
  const auto config = small_cnn("strategy: ddp\n");
  const auto first = *make_run_plan(config, options).prediction;
  EXPECT_EQ(first.block_costs, "measured");
  ASSERT_FALSE(first.profile_file.empty());
  EXPECT_TRUE(std::filesystem::exists(first.profile_file));

  auto other_lr = config;
  other_lr.optimizer.lr = 0.5;  // changes nothing a block's time depends on
  other_lr.name = "another";
  const auto second = *make_run_plan(other_lr, options).prediction;
  EXPECT_EQ(second.block_costs, "profile");
  EXPECT_EQ(second.profile_file, first.profile_file);
  EXPECT_EQ(second.block_costs_measured_ms, first.block_costs_measured_ms);
  EXPECT_DOUBLE_EQ(second.stages[0].forward_ms, first.stages[0].forward_ms);
  EXPECT_DOUBLE_EQ(second.stages[0].backward_ms, first.stages[0].backward_ms);
  EXPECT_DOUBLE_EQ(second.step.step_ms, first.step.step_ms);

  auto larger = config;
  larger.batch_size = 32;
  const auto third = *make_run_plan(larger, options).prediction;
  EXPECT_EQ(third.block_costs, "measured");
  EXPECT_NE(third.profile_file, first.profile_file);

  std::ofstream(first.profile_file) << "{\"blocks\": [";
  EXPECT_EQ(make_run_plan(config, options).prediction->block_costs, "measured");
  EXPECT_EQ(make_run_plan(config, options).prediction->block_costs, "profile");
  options.remeasure = true;
  EXPECT_EQ(make_run_plan(config, options).prediction->block_costs, "measured");
}

// A profile a node sent (`flotilla nodes profile`) serves predictions of
// the same blocks at the same micro-batch with the threads a rank gets on
// that node's cores, and only of that node.
TEST(RunPlanPrediction, ANodesProfileServesItsBlocksMicroBatchAndThreadsOnThatNode) {
  testing::TempDir dir;
  PlanOptions timing;
  timing.predict = true;
  std::string body;
  timing.on_profile = [&](const std::string& record) { body = record; };
  const auto config = small_cnn("strategy: ddp\n");
  make_run_plan(config, timing);
  ASSERT_FALSE(body.empty());
  // As the controller hands it over, from a node of one core whose blocks
  // are slower than this machine's.
  auto record = nlohmann::json::parse(body);
  // The fields docs/records.md lists for a `profile` record (type and rank
  // are added by flotilla-train --profile-blocks).
  std::vector<std::string> keys;
  for (const auto& [key, value] : record.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"cores", "host", "measured_ms", "micro_batch",
                                            "node_key", "profile", "threads", "torch"}));
  EXPECT_EQ(record.at("micro_batch"), 16);
  EXPECT_EQ(record.at("threads"), 1);
  record["node"] = "n1";
  record["cores"] = 1;
  record["profile"]["blocks"][0]["forward_ms"] = 123.0;
  const auto profiles = dir.path() / "node-profiles";
  std::filesystem::create_directories(profiles);
  std::ofstream(profiles / "p1.json") << record.dump();

  PlanOptions from_node;
  from_node.predict = true;
  from_node.node_profiles_dir = profiles.string();
  from_node.node_profiles_node = "n1";
  const auto used = *make_run_plan(config, from_node).prediction;
  EXPECT_EQ(used.block_costs, "node_profile");
  EXPECT_EQ(used.block_costs_node, "n1");
  EXPECT_GE(used.stages[0].forward_ms, 123.0);

  // Threads left to the machine: one on that node's one core, whatever
  // this machine has.
  auto automatic = config;
  automatic.threads = 0;
  EXPECT_EQ(make_run_plan(automatic, from_node).prediction->block_costs, "node_profile");

  auto two_threads = config;
  two_threads.threads = 2;
  const auto other = *make_run_plan(two_threads, from_node).prediction;
  EXPECT_EQ(other.block_costs, "measured");
  const auto said = std::find_if(other.notes.begin(), other.notes.end(), [](const auto& note) {
    return note.find("no profile of node n1 for this model at micro-batch 16") != std::string::npos;
  });
  ASSERT_NE(said, other.notes.end());
  EXPECT_NE(said->find("it has 1 of other configs, e.g. micro-batch 16, 1 thread(s)"),
            std::string::npos)
      << *said;

  from_node.node_profiles_node = "n2";
  EXPECT_EQ(make_run_plan(config, from_node).prediction->block_costs, "measured");
}

// A rank's peak is the loaded process plus its training's tensors: every
// stage above what the planner held once loaded, gradients and momentum in
// it, and the run's peak the fullest stage's.
TEST(RunPlanPrediction, EachRanksPeakMemoryIsTheLoadedProcessPlusItsTraining) {
  PlanOptions options;
  options.predict = true;
  const auto plan = make_run_plan(small_cnn("strategy: ddp\n"), options);
  const auto& p = *plan.prediction;
  EXPECT_EQ(p.memory.measured_as, "resident");
  EXPECT_GT(p.memory.loaded_bytes, 0);
  EXPECT_GE(p.memory.loaded_peak_bytes, p.memory.loaded_bytes);
  ASSERT_EQ(p.stages.size(), 1u);
  // fp32 gradients of every trainable parameter at least (momentum adds as much).
  EXPECT_GE(p.stages[0].training_memory_bytes, 4 * plan.trainable);
  EXPECT_GE(p.stages[0].evaluation_memory_bytes, 4 * plan.trainable);
  EXPECT_EQ(
      p.stages[0].peak_memory_bytes,
      std::max(p.memory.loaded_peak_bytes, p.memory.loaded_bytes + p.memory.runtime_bytes +
                                               std::max(p.stages[0].training_memory_bytes,
                                                        p.stages[0].evaluation_memory_bytes)));
  EXPECT_EQ(p.memory.peak_bytes, p.stages[0].peak_memory_bytes);
}

// GPipe keeps all four micro-batches' activations on every stage, 1F1B at
// most stages - s (two, then one); the blocks' bytes are counted, not timed.
TEST(RunPlanPrediction, GPipesStagesHoldMoreMicroBatchesThan1F1Bs) {
  PlanOptions options;
  options.predict = true;
  const std::string layout = "strategy: pipeline\nnodes: [a, b]\nchunks: 4\nbalance: [2, 2]\n";
  const auto gpipe = *make_run_plan(small_cnn(layout), options).prediction;
  const auto one_f_one_b =
      *make_run_plan(small_cnn(layout + "schedule: 1f1b\n"), options).prediction;
  ASSERT_EQ(gpipe.stages.size(), 2u);
  ASSERT_EQ(one_f_one_b.stages.size(), 2u);
  for (size_t s = 0; s < 2; ++s)
    EXPECT_GT(gpipe.stages[s].training_memory_bytes, one_f_one_b.stages[s].training_memory_bytes)
        << "stage " << s;
}

TEST(TensorMemory, AWatchCountsATensorsBytesAndKeepsItsPeakAfterItIsFreed) {
  TensorMemoryWatch watch(torch::kCPU);
  const int64_t before = watch.in_use();
  {
    const auto tensor = torch::empty({1024, 256});  // 1 MiB of float
    EXPECT_EQ(watch.in_use(), before + (1 << 20));
  }
  EXPECT_EQ(watch.in_use(), before);
  EXPECT_GE(watch.peak(), before + (1 << 20));
  EXPECT_GE(watch.highest(), before + (1 << 20));
  watch.mark();
  EXPECT_EQ(watch.peak(), before);
  EXPECT_GE(watch.highest(), before + (1 << 20));
  // A convolution's workspace comes through raw_allocate, which needs the
  // pointer to be its own context.
  const auto out = torch::conv2d(torch::randn({2, 3, 16, 16}), torch::randn({4, 3, 3, 3}));
  EXPECT_EQ(out.size(1), 4);
}

}  // namespace
}  // namespace flotilla
