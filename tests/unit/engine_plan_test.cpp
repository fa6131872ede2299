// The run plan (flotilla-train --plan) against the engine's own objects, the
// rank placement, the thread-pool sizing and the all-reduce bench's options.
// Plan against real runs: tests/integration/train_process_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "codec/activation_codec.h"
#include "comm/gradient_buckets.h"
#include "flotilla/engine/allreduce_bench.h"
#include "flotilla/protocol/rank_placement.h"
#include "models/model_factory.h"
#include "pipeline/partition.h"
#include "pipeline/schedule.h"
#include "plan/run_plan.h"
#include "runtime/thread_pools.h"
#include "temp_dir.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

ExperimentConfig resnet18_pipeline_ddp() {
  auto c = parse_experiment(R"(
name: plan
model: resnet18
dataset: synthetic
synthetic: {shape: [3, 32, 32], classes: 10}
strategy: pipeline_ddp
nodes: [n1, n2]
ranks_per_node: 2
replicas: 2
balance: [4, 6]
batch_size: 10
chunks: 3
bucket_mb: 2
compression: {method: sort_quant, bits: 6, split_bits: 2}
)");
  return c;
}

TEST(RankPlacement, FillsNodesInOrderAndNumbersStagesWithinReplicas) {
  const auto placements = rank_placements(resnet18_pipeline_ddp());
  ASSERT_EQ(placements.size(), 4u);
  // rank: node, local rank, stage, replica
  const int64_t want[4][4] = {{0, 0, 0, 0}, {0, 1, 1, 0}, {1, 0, 0, 1}, {1, 1, 1, 1}};
  for (int64_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(placements[r].rank, r);
    EXPECT_EQ(placements[r].node_index, want[r][0]);
    EXPECT_EQ(placements[r].node, want[r][0] == 0 ? "n1" : "n2");
    EXPECT_EQ(placements[r].local_rank, want[r][1]);
    EXPECT_EQ(placements[r].stage, want[r][2]);
    EXPECT_EQ(placements[r].replica, want[r][3]);
  }
  EXPECT_EQ(ranks_of_node(resnet18_pipeline_ddp(), 1), (std::vector<int64_t>{2, 3}));
}

TEST(RankPlacement, DataParallelRanksAreReplicasOfOneStage) {
  auto c = parse_experiment("strategy: ddp\nnodes: [a, b, c]\nranks_per_node: 2\n");
  const auto layout = run_layout(c);
  EXPECT_EQ(layout.world_size, 6);
  EXPECT_EQ(layout.replicas, 6);
  EXPECT_EQ(layout.stages, 1);
  EXPECT_FALSE(layout.pipelined);
  const auto fifth = place_rank(c, 5);
  EXPECT_EQ(fifth.node, "c");
  EXPECT_EQ(fifth.local_rank, 1);
  EXPECT_EQ(fifth.stage, 0);
  EXPECT_EQ(fifth.replica, 5);
}

TEST(MicroBatches, DifferByAtMostOneLargerFirstAndNeverOutnumberTheSamples) {
  EXPECT_EQ(micro_batch_sizes(10, 3), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(micro_batch_sizes(64, 4), (std::vector<int64_t>{16, 16, 16, 16}));
  EXPECT_EQ(micro_batch_sizes(2, 8), (std::vector<int64_t>{1, 1}));
}

TEST(GradientBucketAssignment, ClosesTheFirstBucketAtOneMebibyteAndLaterOnesAtTheCap) {
  const int64_t mib = 1 << 20;
  // Launched in reverse: parameter 4 first.
  const std::vector<int64_t> bytes{3 * mib, 2 * mib, mib / 2, mib / 2, mib / 2};
  const auto buckets = GradientBuckets::assign(bytes, 4 * mib);
  const std::vector<std::vector<size_t>> want{{4, 3}, {2, 1}, {0}};
  EXPECT_EQ(buckets, want);
}

TEST(ThreadPools, ARankGetsItsConfiguredThreadsOrItsShareOfTheNodesCores) {
  ExperimentConfig c;
  c.threads = 3;
  c.ranks_per_node = 4;
  EXPECT_EQ(threads_per_rank(c, 16), 3) << "threads: N is N, whatever the node";
  c.threads = 0;
  EXPECT_EQ(threads_per_rank(c, 16), 4);
  EXPECT_EQ(threads_per_rank(c, 2), 1) << "more ranks than cores still get one thread each";
  c.ranks_per_node = 1;
  EXPECT_EQ(threads_per_rank(c, 8), 8);
  EXPECT_GE(usable_cores(), 1);
}

TEST(ThreadPools, SettingThemSetsLibTorchsAndTheBlasPool) {
  const int before = torch::get_num_threads();
  set_compute_threads(1);
  EXPECT_EQ(torch::get_num_threads(), 1);
  // The reference BLAS has no pool and reports 1; OpenBLAS and BLIS report what was set.
  EXPECT_EQ(blas_threads(), 1);
  const auto blas = blas_info();
  EXPECT_FALSE(blas.name.empty());
  set_compute_threads(before);
  if (blas.has_thread_pool) {
    EXPECT_EQ(blas_threads(), before) << blas.name;
  }
}

TEST(RandomInitialisationSkipped, BuildsTheSameStructureWithoutDrawingAndEndsCleanly) {
  ExperimentConfig c;
  c.model = ModelKind::transformer_encoder;
  c.transformer = {1000, 64, 2, 4, 128, 34};
  const DataShape tokens{{32}, 2, 1000};
  torch::manual_seed(7);
  auto drawn = build_model(c, tokens);
  torch::nn::Sequential skipped;
  torch::manual_seed(7);
  {
    RandomInitialisationSkipped skip;
    skipped = build_model(c, tokens);
  }
  // Nothing was drawn: the generator is where seeding left it.
  const auto after_build = torch::rand({4});
  torch::manual_seed(7);
  EXPECT_TRUE(torch::equal(after_build, torch::rand({4})));
  EXPECT_EQ(parameter_count(*skipped), parameter_count(*drawn));
  ASSERT_EQ(skipped->parameters().size(), drawn->parameters().size());
  for (size_t i = 0; i < drawn->parameters().size(); ++i)
    EXPECT_EQ(skipped->parameters()[i].sizes(), drawn->parameters()[i].sizes()) << i;
  // After the guard, building draws again: the same seed gives the same weights.
  torch::manual_seed(7);
  auto again = build_model(c, tokens);
  for (size_t i = 0; i < drawn->parameters().size(); ++i)
    EXPECT_TRUE(torch::equal(again->parameters()[i], drawn->parameters()[i])) << i;
}

TEST(RunPlan, ResnetPipelineDdpAcrossTwoNodes) {
  const auto config = resnet18_pipeline_ddp();
  const auto plan = make_run_plan(config, {});
  ASSERT_EQ(plan.blocks.size(), 10u);
  EXPECT_EQ(plan.blocks[0].name, "stem");
  EXPECT_EQ(plan.blocks[0].kind, "ConvBnRelu");
  EXPECT_EQ(plan.blocks[9].name, "head");
  EXPECT_EQ(plan.parameters, 11173962);
  EXPECT_EQ(plan.trainable, plan.parameters);
  torch::manual_seed(0);
  auto model = build_model(config, {{3, 32, 32}, 10});
  for (size_t b = 0; b < model->size(); ++b)
    EXPECT_EQ(plan.blocks[b].parameters, parameter_count(*(model->begin() + b)->ptr())) << b;

  EXPECT_EQ(plan.layout.stages, 2);
  EXPECT_EQ(plan.layout.replicas, 2);
  EXPECT_EQ(plan.balance, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(plan.balance_source, "given");
  EXPECT_EQ(plan.micro_batch_sizes, (std::vector<int64_t>{4, 3, 3}));

  // Blocks 0-3 (stem, layer1 x2, layer2_0) end at 128 x 16 x 16.
  ASSERT_EQ(plan.boundaries.size(), 1u);
  const auto& boundary = plan.boundaries[0];
  EXPECT_EQ(boundary.sample_shape, (std::vector<int64_t>{128, 16, 16}));
  EXPECT_EQ(boundary.shape, (std::vector<int64_t>{4, 128, 16, 16}));
  const int64_t per_sample = 128 * 16 * 16;
  const auto codec = make_codec(config.compression);
  EXPECT_EQ(boundary.activations.fp32_bytes, 4 * per_sample * 4);
  EXPECT_EQ(boundary.activations.wire_bytes, codec->encoded_bytes(4 * per_sample));
  EXPECT_EQ(boundary.activations.wire_bytes_per_step,
            codec->encoded_bytes(4 * per_sample) + 2 * codec->encoded_bytes(3 * per_sample));
  EXPECT_EQ(boundary.activations.fp32_bytes_per_step, 10 * per_sample * 4);
  EXPECT_TRUE(boundary.gradients.sent);
  EXPECT_EQ(boundary.gradients.wire_bytes_per_step, boundary.activations.wire_bytes_per_step);

  ASSERT_EQ(plan.stages.size(), 2u);
  int64_t stage0 = 0;
  for (int b = 0; b < 4; ++b) stage0 += plan.blocks[b].parameters;
  EXPECT_EQ(plan.stages[0].parameters, stage0);
  EXPECT_EQ(plan.stages[1].parameters, plan.parameters - stage0);
  for (const auto& stage : plan.stages) {
    ASSERT_TRUE(stage.allreduce);
    EXPECT_EQ(stage.allreduce->ranks, 2);
    EXPECT_EQ(stage.allreduce->bytes_per_step, 4 * stage.trainable);
    EXPECT_GT(stage.allreduce->bucket_bytes.size(), 1u) << "2 MiB buckets";
    EXPECT_LE(stage.allreduce->bucket_bytes.front(), 1 << 20) << "the first bucket";
    EXPECT_EQ(stage.bytes_sent_per_step,
              stage.allreduce->bytes_per_step + boundary.activations.wire_bytes_per_step);
  }
  EXPECT_EQ(plan.ranks.size(), 4u);
}

TEST(RunPlan, FrozenLeadingBlocksLeaveTheAllReduceAndStopGradientsAtTheBoundary) {
  auto config = parse_experiment(R"(
model: transformer_encoder
transformer: {vocab: 1000, hidden: 64, layers: 4, heads: 4, ffn: 128, max_positions: 34}
dataset: synthetic
synthetic: {shape: [32], vocab: 1000, classes: 2}
strategy: pipeline_ddp
ranks_per_node: 6
replicas: 2
balance: [2, 2, 2]
freeze: {method: fixed, schedule: [{at_step: 1, blocks: 2}, {at_step: 50, blocks: 3}]}
)");
  const auto plan = make_run_plan(config, {});
  EXPECT_EQ(plan.frozen_blocks, 2);
  EXPECT_EQ(plan.blocks[0].trainable, 0);
  EXPECT_EQ(plan.blocks[1].trainable, 0);
  EXPECT_EQ(plan.blocks[2].trainable, plan.blocks[2].parameters);
  ASSERT_EQ(plan.boundaries.size(), 2u);
  EXPECT_FALSE(plan.boundaries[0].gradients.sent) << "stage 0 is wholly frozen";
  EXPECT_EQ(plan.boundaries[0].gradients.wire_bytes_per_step, 0);
  EXPECT_TRUE(plan.boundaries[1].gradients.sent);
  EXPECT_EQ(plan.boundaries[0].sample_shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(plan.stages[0].allreduce->bytes_per_step, 0);
  EXPECT_TRUE(plan.stages[0].allreduce->bucket_bytes.empty());
  EXPECT_EQ(plan.stages[1].allreduce->bytes_per_step, 4 * plan.stages[1].parameters);
}

// The layouts an elastic pipeline is to go through, by the trainer's own
// rule: the ViT of the elastic process test (6 blocks, 2 stages x 2
// replicas) becomes 4 replicas of the whole model when 5 blocks freeze at
// step 6, not before (2 frozen at step 3 leave the halved pipeline too slow).
TEST(RunPlan, AnElasticPipelinesLayoutsFollowItsFreezeSchedule) {
  auto config = parse_experiment(R"(
model: vit
vit: {patch: 4, depth: 4, dim: 32, heads: 4, mlp_dim: 64}
dataset: synthetic
synthetic: {shape: [3, 16, 16], classes: 4}
batch_size: 16
chunks: 2
strategy: pipeline_ddp
ranks_per_node: 4
replicas: 2
balance: [3, 3]
freeze: {method: fixed, schedule: [{at_step: 3, blocks: 2}, {at_step: 6, blocks: 5}]}
elastic: {pipe: true, dp: true}
)");
  const auto plan = make_run_plan(config, {});
  EXPECT_EQ(plan.elastic_costs, "estimated");
  // The blocks are timed here: whether two frozen blocks already let the
  // pipe shrink depends on this machine's timings (under CI's load it did,
  // at step 3). Every move is at a step of the schedule with its blocks
  // frozen, and all five frozen leave one stage of four replicas.
  ASSERT_FALSE(plan.elastic.empty());
  ASSERT_LE(plan.elastic.size(), 2u);
  for (const auto& move : plan.elastic)
    EXPECT_TRUE((move.at_step == 3 && move.frozen_blocks == 2) ||
                (move.at_step == 6 && move.frozen_blocks == 5))
        << "a move at step " << move.at_step << " with " << move.frozen_blocks << " frozen";
  EXPECT_EQ(plan.elastic.back().layout, (ElasticLayout{1, 4, {6}}));
  const auto doc = nlohmann::json::parse(plan_json(config));
  EXPECT_EQ(doc["elastic"]["layouts"].back()["replicas"], 4);
  // Without elastic.pipe there is no sequence to show.
  config.elastic = {};
  EXPECT_TRUE(nlohmann::json::parse(plan_json(config))["elastic"].is_null());
}

TEST(RunPlan, WithoutABalanceEstimatesOneAndSaysSo) {
  auto config = parse_experiment(R"(
model: small_cnn
dataset: synthetic
synthetic: {shape: [1, 28, 28], classes: 10}
strategy: pipeline
ranks_per_node: 2
)");
  const auto plan = make_run_plan(config, {});
  EXPECT_EQ(plan.balance_source, "estimated");
  ASSERT_EQ(plan.block_ms.size(), 4u);
  ASSERT_EQ(plan.balance.size(), 2u);
  EXPECT_EQ(plan.balance[0] + plan.balance[1], 4);
  EXPECT_GE(plan.measure_ms, 0.0);
  const auto doc = nlohmann::json::parse(plan_json(config));
  EXPECT_EQ(doc["balance"]["source"], "estimated");
  EXPECT_EQ(doc["stage_plans"].size(), 2u);
  EXPECT_TRUE(doc["stage_plans"][0]["allreduce"].is_null()) << "one replica averages nothing";
}

// Seed 002's 4-stage MobileNetV2 without a given cut: its 20 blocks' costs
// as the plan estimated them on a quiet machine (flotilla-train --plan,
// 3x32x32, batch 64 in 4 chunks) are cut within 1.5x between stages (ties
// once went to the later cut, [3, 1, 15, 1]: issue 25). Recorded, not timed
// here: under a loaded CI the live estimate itself is noise.
TEST(RunPlan, FourStageMobileNetV2IsCutWithinOneAndAHalfTimesBetweenStages) {
  const std::vector<double> block_ms{0.384716, 0.456775, 0.868365, 1.822415, 0.93754,
                                     0.956714, 0.557305, 0.475827, 0.53656,  0.390828,
                                     0.375695, 0.483543, 1.29319,  0.829976, 0.866174,
                                     1.170319, 1.289738, 1.77064,  1.209308, 0.18147};
  const auto balance = balance_by_cost(block_ms, 4);
  ASSERT_EQ(balance.size(), 4u);
  std::vector<double> stage_ms;
  size_t block = 0;
  for (const int64_t blocks : balance) {
    double sum = 0;
    for (int64_t i = 0; i < blocks; ++i) sum += block_ms.at(block++);
    stage_ms.push_back(sum);
  }
  EXPECT_EQ(block, 20u);
  const auto [lightest, heaviest] = std::minmax_element(stage_ms.begin(), stage_ms.end());
  EXPECT_LE(*heaviest / *lightest, 1.5)
      << ::testing::PrintToString(balance) << " " << ::testing::PrintToString(stage_ms);
  // The plan of that config cuts the model's 20 blocks into 4 stages by the estimate.
  const auto plan = make_run_plan(parse_experiment(R"(
model: mobilenet_v2
dataset: synthetic
synthetic: {shape: [3, 32, 32], classes: 10, train_samples: 256, test_samples: 32}
strategy: pipeline
ranks_per_node: 4
batch_size: 64
chunks: 4
)"),
                                  {});
  EXPECT_EQ(plan.balance_source, "estimated");
  ASSERT_EQ(plan.block_ms.size(), 20u);
  EXPECT_EQ(plan.balance, balance_by_cost(plan.block_ms, 4));
}

TEST(RunPlan, WithMeasureTimesTheBlocksAsRankZeroDoes) {
  auto config = parse_experiment(R"(
model: small_cnn
dataset: synthetic
synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 32}
strategy: pipeline
ranks_per_node: 2
batch_size: 16
chunks: 2
)");
  PlanOptions measuring;
  measuring.measure = true;
  const auto plan = make_run_plan(config, measuring);
  EXPECT_EQ(plan.balance_source, "measured");
  ASSERT_EQ(plan.block_ms.size(), 4u);
  for (double ms : plan.block_ms) EXPECT_GT(ms, 0.0);
  EXPECT_GE(plan.measure_ms, plan.block_ms[0]);
}

TEST(RunPlan, EachBucketIsClosedByTheLowestBlockOfItsGradients) {
  const auto plan = make_run_plan(resnet18_pipeline_ddp(), {});
  for (const auto& stage : plan.stages) {
    const auto& a = *stage.allreduce;
    ASSERT_EQ(a.bucket_closing_block.size(), a.bucket_bytes.size());
    // Launched as backward reaches them: from the stage's last block down.
    EXPECT_TRUE(std::is_sorted(a.bucket_closing_block.rbegin(), a.bucket_closing_block.rend()));
    EXPECT_GE(a.bucket_closing_block.back(), 0);
    EXPECT_LT(a.bucket_closing_block.front(), stage.blocks);
  }
}

// A global batch is each replica's batch times the replicas: DDP's every
// rank, a replicated pipeline's replicas (its stages share one batch).
TEST(RankPlacement, AGlobalBatchIsSharedEvenlyByTheDataParallelReplicas) {
  const auto ddp = parse_experiment(
      "strategy: ddp\nnodes: [a, b]\nranks_per_node: 2\nbatch_size: 64\nbatch_scope: global\n");
  EXPECT_EQ(replica_batch_size(ddp), 16);
  const auto trained = with_replica_batch(ddp);
  EXPECT_EQ(trained.batch_size, 16);
  EXPECT_EQ(trained.batch_scope, BatchScope::per_replica);
  const auto pipe = parse_experiment(
      "strategy: pipeline_ddp\nranks_per_node: 4\nreplicas: 2\nbatch_size: 64\n"
      "batch_scope: global\nchunks: 4\n");
  EXPECT_EQ(replica_batch_size(pipe), 32);
  auto per_replica = ddp;
  per_replica.batch_scope = BatchScope::per_replica;
  EXPECT_EQ(replica_batch_size(per_replica), 64);
  // The plan counts what a rank trains: each replica's 16, 64 in all.
  const auto plan = make_run_plan(ddp, {});
  EXPECT_EQ(plan.batch_size, 16);
  EXPECT_EQ(plan.batch_size * plan.layout.replicas, 64);
}

TEST(RunPlan, SingleRankHasOneStageAndNoTraffic) {
  const auto config = parse_experiment("name: single\n");
  const auto plan = make_run_plan(config, {});
  EXPECT_EQ(plan.balance_source, "whole model");
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_FALSE(plan.stages[0].allreduce);
  EXPECT_EQ(plan.stages[0].bytes_sent_per_step, 0);
  EXPECT_TRUE(plan.boundaries.empty());
  EXPECT_EQ(plan.parameters, 421642);
}

TEST(RunPlan, DdpOnOneRankStillAllReducesAsTheEngineDoes) {
  auto config = parse_experiment("strategy: ddp\n");
  const auto plan = make_run_plan(config, {});
  ASSERT_TRUE(plan.stages[0].allreduce);
  EXPECT_EQ(plan.stages[0].allreduce->ranks, 1);
  EXPECT_EQ(plan.stages[0].allreduce->bytes_per_step, 4 * 421642);
}

TEST(RunPlan, AModelThatCannotTakeTheDataIsAConfigError) {
  // The validator refuses this pair when it reads it; the model factory
  // refuses it again for shapes it learns only from the data.
  auto config = parse_experiment(
      "model: vit\ndataset: synthetic\nsynthetic: {shape: [3, 32, 32]}\nvit: {patch: 4}\n");
  config.synthetic.shape = {3, 30, 30};
  try {
    make_run_plan(config, {});
    ADD_FAILURE() << "a 4-pixel patch was accepted on 30x30 images";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("vit.patch: must divide the 30x30 images"),
              std::string::npos)
        << e.what();
  }
}

TEST(AllreduceBenchOptions, ByteSizesTakeBinarySuffixes) {
  EXPECT_EQ(parse_byte_size("8"), 8);
  EXPECT_EQ(parse_byte_size("64K"), 64 * 1024);
  EXPECT_EQ(parse_byte_size("256M"), int64_t{256} << 20);
  EXPECT_EQ(parse_byte_size("1G"), int64_t{1} << 30);
  EXPECT_FALSE(parse_byte_size("1.5M"));
  EXPECT_FALSE(parse_byte_size("12KB"));
  EXPECT_FALSE(parse_byte_size("-8"));
  EXPECT_FALSE(parse_byte_size(""));
}

TEST(AllreduceBenchOptions, BadSizesAndCountsAreNamed) {
  AllreduceBenchOptions o;
  EXPECT_TRUE(allreduce_bench_problems(o).empty());
  o.min_bytes = 6;
  o.max_bytes = 4;
  o.step_factor = 3;
  o.iterations = 0;
  o.warmup = -1;
  const std::vector<std::string> want{
      "--min-bytes: must be a positive multiple of 4 (float32 values), got 6 bytes",
      "--max-bytes: must be at least --min-bytes (6 bytes), got 4 bytes",
      "--step-factor: must be 2 or 4, got 3", "--iterations: must be at least 1, got 0",
      "--warmup: must be 0 or more, got -1"};
  EXPECT_EQ(allreduce_bench_problems(o), want);
}

}  // namespace
}  // namespace flotilla
