// The step model (issue 27) on cases whose answer is known by hand: GPipe's
// and 1F1B's (m + S - 1)(f + b) on equal stages and a free link, a link's
// latency on the critical path, the ring all-reduce's time from a measured
// bus bandwidth, and DDP's buckets overlapping the backward; and a rank's
// peak memory from its blocks' measured bytes.
#include <gtest/gtest.h>

#include "plan/memory_prediction.h"
#include "plan/step_prediction.h"

namespace flotilla::predict {
namespace {

PipelineInputs equal_stages(Schedule schedule, int64_t stages, int64_t micro_batches) {
  PipelineInputs in;
  in.schedule = schedule;
  in.micro_batches = micro_batches;
  in.stages.assign(static_cast<size_t>(stages), StageCost{1.0, 2.0, 0.0, 0.0});
  in.boundary_bytes.assign(static_cast<size_t>(stages - 1), 1e6);
  return in;
}

class EqualStages : public ::testing::TestWithParam<Schedule> {};

TEST_P(EqualStages, TakeMPlusSMinusOneForwardBackwardsOnAFreeLink) {
  const auto p = predict_pipeline(equal_stages(GetParam(), 4, 8));
  EXPECT_DOUBLE_EQ(p.step_ms, (8 + 4 - 1) * 3.0);
  EXPECT_DOUBLE_EQ(p.compute_ms, 8 * 3.0);
  EXPECT_DOUBLE_EQ(p.exposed_comm_ms, 3 * 3.0);
  EXPECT_DOUBLE_EQ(p.bubble_fraction, 3.0 / 11.0);  // GPipe's (S - 1) / (m + S - 1)
}

INSTANTIATE_TEST_SUITE_P(Schedules, EqualStages,
                         ::testing::Values(Schedule::gpipe, Schedule::one_f_one_b),
                         [](const auto& info) {
                           return std::string(info.param == Schedule::gpipe ? "GPipe" : "OneFOneB");
                         });

// Two stages, one micro-batch, 0.5 ms each way: F0 0-1, F1 1.5-2.5, B1
// 2.5-4.5, B0 5-7; then stage 0's optimizer, 0.25 ms.
TEST(PipelinePrediction, ALinksTimeLiesOnTheCriticalPathBothWays) {
  auto in = equal_stages(Schedule::gpipe, 2, 1);
  in.link = {0.5, std::numeric_limits<double>::infinity()};
  in.stages[0].optimizer_ms = 0.25;
  const auto p = predict_pipeline(in);
  EXPECT_DOUBLE_EQ(p.step_ms, 7.25);
  // A codec's encode + decode at the boundary adds to each crossing.
  in.boundary_codec_ms = {0.1};
  EXPECT_DOUBLE_EQ(predict_pipeline(in).step_ms, 7.45);
  // Bytes at a bandwidth: 1 MB at 1 MB/ms is 1 ms more each way.
  in.boundary_codec_ms.clear();
  in.link = {0.5, 1e6};
  EXPECT_DOUBLE_EQ(predict_pipeline(in).step_ms, 9.25);
}

// Stage 1 is still computing micro-batch 0 when micro-batch 1's activations
// are sent; they cross once it is free and posts the receive: F1 on stage 1
// at 2.5 + 0.5 = 3, not at 2.5. Then B0 4-6, B1 6-8 there; stage 0's B0
// 6.5-8.5, and its B1 waits for its own receive again: 9-11.
TEST(PipelinePrediction, ATransferStartsOnceTheReceiverIsFreeToPostItsReceive) {
  auto in = equal_stages(Schedule::gpipe, 2, 2);
  in.link = {0.5, std::numeric_limits<double>::infinity()};
  EXPECT_DOUBLE_EQ(predict_pipeline(in).step_ms, 11.0);
}

TEST(PipelinePrediction, ASlowStageSetsThePace) {
  auto in = equal_stages(Schedule::gpipe, 2, 4);
  in.stages[1] = {2.0, 4.0, 0.0, 0.0};
  // Stage 1 runs its 4 forwards back to back from t = 1, then 4 backwards:
  // 1 + 4 x 2 + 4 x 4 = 25; stage 0's last backward follows the last of its.
  const auto p = predict_pipeline(in);
  EXPECT_DOUBLE_EQ(p.step_ms, 25.0 + 2.0);
  EXPECT_DOUBLE_EQ(p.compute_ms, 4 * 6.0);
}

TEST(AllReducePrediction, RingTimeFromTheBusBandwidthAtTheMessageSize) {
  AllReduceModel model{{{1e6, 1.0}, {1e8, 3.0}}};
  // 4 ranks: 2 x 3/4 x bytes / busbw.
  EXPECT_DOUBLE_EQ(model.time_ms(1e6, 4), 1.5 * 1e6 / 1e9 * 1e3);
  EXPECT_DOUBLE_EQ(model.time_ms(1e10, 4), 1.5 * 1e10 / 3e9 * 1e3);  // held past the last point
  EXPECT_DOUBLE_EQ(model.time_ms(1e7, 4), 1.5 * 1e7 / 2e9 * 1e3);    // halfway in log size
  EXPECT_DOUBLE_EQ(model.time_ms(1e7, 1), 0.0);
  EXPECT_DOUBLE_EQ(AllReduceModel{}.time_ms(1e7, 4), 0.0);
}

DdpInputs three_blocks_two_buckets() {
  DdpInputs in;
  in.block_forward_ms = {0.5, 0.5, 0.5};
  in.block_backward_ms = {1, 1, 1};
  in.buckets = {{2, 1e6}, {0, 1e6}};
  in.optimizer_ms = 0.5;
  in.allreduce = AllReduceModel{{{1e6, 1.0}}};
  in.ranks = 2;
  return in;
}

// Three blocks of 1 ms backward each, in reverse: block 2's gradients are
// ready at 1, block 0's at 3. Buckets closing with blocks 2 and 0, 1 ms of
// all-reduce each on 2 ranks (1e6 bytes at 1 GB/s): the first hides under
// the backward, the second is exposed, 1 ms.
TEST(DdpPrediction, BucketsOverlapTheBackwardAndTheLastIsExposed) {
  auto in = three_blocks_two_buckets();
  const auto p = predict_ddp(in);
  EXPECT_DOUBLE_EQ(p.compute_ms, 1.5 + 3 + 0.5);
  EXPECT_DOUBLE_EQ(p.step_ms, 1.5 + 4 + 0.5);
  EXPECT_DOUBLE_EQ(p.exposed_comm_ms, 1.0);
  in.ranks = 1;  // nothing to all-reduce
  EXPECT_DOUBLE_EQ(predict_ddp(in).step_ms, 5.0);
}

TEST(CoreSharing, BeyondTheMeasuredRanksTheSlowdownGrowsInProportion) {
  EXPECT_DOUBLE_EQ(sharing_slowdown({1.0, 1.3}, 1), 1.0);
  EXPECT_DOUBLE_EQ(sharing_slowdown({1.0, 1.3}, 2), 1.3);
  EXPECT_DOUBLE_EQ(sharing_slowdown({1.0, 1.3}, 4), 2.6);
  EXPECT_DOUBLE_EQ(sharing_slowdown({1.0, 0.9}, 2), 1.0);  // never faster than alone
  EXPECT_DOUBLE_EQ(sharing_slowdown({}, 3), 1.0);
}

// Ranks sharing one machine's cores: with both stages there, twice as slow
// while both compute. One micro-batch through 2 stages never computes on
// both at once, so nothing changes; with 2 micro-batches they overlap.
TEST(PipelinePrediction, StagesSharingAMachineSlowEachOtherOnlyWhileBothCompute) {
  auto in = equal_stages(Schedule::gpipe, 2, 1);
  const double alone = predict_pipeline(in).step_ms;  // F0 0-1, F1 1-2, B1 2-4, B0 4-6
  in.stage_machine = {0, 0};
  in.stage_ranks = {1, 1};
  in.core_sharing = {1.0, 2.0};
  EXPECT_DOUBLE_EQ(predict_pipeline(in).step_ms, alone);

  // Two micro-batches: F0(0) 0-1; then F0(1) and F1(0) at once, each at half
  // speed, both end at 3; F1(1) alone 3-4; B1(0) 4-6 while stage 0 waits;
  // then B1(1) and B0(0) at once: B1(1) 2 ms of work at half speed, B0(0)
  // the same, both end at 10; B0(1) alone 10-12.
  in.micro_batches = 2;
  EXPECT_DOUBLE_EQ(predict_pipeline(in).step_ms, 12.0);
  // On machines of their own: the GPipe (m + S - 1)(f + b) of 9.
  in.stage_machine = {0, 1};
  EXPECT_DOUBLE_EQ(predict_pipeline(in).step_ms, 9.0);
  // Two replicas of each stage on one machine: four ranks at once, beyond
  // the measured two: 2 x 4/2 = 4 times slower while both stages compute.
  in.stage_machine = {0, 0};
  in.stage_ranks = {2, 2};
  EXPECT_GT(predict_pipeline(in).step_ms, 12.0);
  // Malformed: a machine per stage is expected.
  in.stage_machine = {0};
  EXPECT_THROW(predict_pipeline(in), std::invalid_argument);
}

// Every rank computes at once: the slowdown stretches the forward, the
// backward and the optimizer; where the ranks fill the cores the buckets
// are all-reduced after the backward, one after the other.
TEST(DdpPrediction, RanksSharingCoresComputeSlowerAndAllReduceAfterTheBackwardWhenTheyFillThem) {
  auto in = three_blocks_two_buckets();
  in.slowdown = 1.5;
  auto p = predict_ddp(in);
  EXPECT_DOUBLE_EQ(p.compute_ms, 1.5 * 5.0);
  EXPECT_DOUBLE_EQ(p.step_ms, 1.5 * 5.0 + 1.0);  // the last bucket still exposed
  in.comm_beside_backward = false;
  p = predict_ddp(in);
  EXPECT_DOUBLE_EQ(p.step_ms, 1.5 * 5.0 + 2.0);  // both buckets after the backward
  EXPECT_DOUBLE_EQ(p.exposed_comm_ms, 2.0);
}

// Two blocks: the first holds 100 and peaks 150 above what came before, the
// second holds 40 and peaks 90; gradients 10 and 20.
RankMemoryInputs two_blocks() {
  RankMemoryInputs in;
  in.loaded_bytes = 1000;
  in.loaded_peak_bytes = 1000;
  in.blocks = {{100, 150, 10, false, 120}, {40, 90, 20, false, 60}};
  in.optimizer_state_bytes = 30;
  return in;
}

TEST(RankMemory, APassIsFullestInTheBackwardWithTheMostHeldBeforeIt) {
  // Block 0's backward: 0 held before it, block 1's gradient made, its own
  // 150 -> 170; block 1's: 100 held before it, 90 -> 190.
  const auto memory = predict_rank_memory(two_blocks());
  EXPECT_EQ(memory.training_bytes, 30 + 190);
  EXPECT_EQ(memory.peak_bytes, 1000 + 30 + 190);
}

TEST(RankMemory, EveryOtherLiveMicroBatchKeepsItsActivationsAndInput) {
  auto in = two_blocks();
  in.live_micro_batches = 4;
  in.received_bytes = 5;
  EXPECT_EQ(predict_rank_memory(in).training_bytes, 30 + 3 * (140 + 5) + 5 + 190);
}

TEST(RankMemory, AFrozenBlockHoldsNothingForABackward) {
  auto in = two_blocks();
  in.blocks[0].frozen = true;
  in.blocks[0].gradient = 0;
  // Block 0 only passes through its forward (120); block 1's backward has
  // nothing of block 0 held: 90.
  EXPECT_EQ(predict_rank_memory(in).training_bytes, 30 + 120);
}

TEST(RankMemory, DdpsBucketsAtTheEndOfTheBackwardCanBeTheFullestMoment) {
  auto in = two_blocks();
  in.bucket_bytes = 400;
  EXPECT_EQ(predict_rank_memory(in).training_bytes, 30 + 30 + 400);
}

TEST(RankMemory, TheEvaluationHoldsTheLastStepsGradientsAndTheState) {
  auto in = two_blocks();
  in.blocks[0].evaluation_peak = 500;
  in.blocks[1].evaluation_peak = 300;
  const auto memory = predict_rank_memory(in);
  EXPECT_EQ(memory.evaluation_bytes, 30 + 30 + 500);
  EXPECT_EQ(memory.training_bytes, 30 + 190);
  EXPECT_EQ(memory.peak_bytes, 1000 + 30 + 30 + 500);
}

TEST(RankMemory, LoadingsPeakIsTheFloor) {
  auto in = two_blocks();
  in.loaded_peak_bytes = 5000;
  in.runtime_bytes = 7;
  EXPECT_EQ(predict_rank_memory(in).peak_bytes, 5000);
  in.loaded_peak_bytes = 0;
  EXPECT_EQ(predict_rank_memory(in).peak_bytes, 1000 + 7 + 30 + 190);
}

}  // namespace
}  // namespace flotilla::predict
