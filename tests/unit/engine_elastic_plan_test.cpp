// AutoPipe's decision: when a frozen prefix lets the pipeline halve.

#include <gtest/gtest.h>

#include "pipeline/elastic_plan.h"

namespace flotilla {
namespace {

// `blocks` alike: forward 1 ms, forward + backward 3 ms.
std::vector<BlockCost> equal_blocks(int64_t blocks) {
  return std::vector<BlockCost>(size_t(blocks), BlockCost{1.0, 3.0});
}

TEST(ElasticPlan, FrozenBlocksCostTheirForwardOnly) {
  const auto cost = costs_with_frozen({{1, 3}, {2, 5}, {4, 9}}, 2);
  EXPECT_EQ(cost, (std::vector<double>{1, 2, 9}));
  EXPECT_DOUBLE_EQ(slowest_stage(cost, {2, 1}), 9);
  EXPECT_DOUBLE_EQ(slowest_stage(cost, {1, 2}), 11);
}

TEST(ElasticPlan, NothingFrozenKeepsThePipeline) {
  const ElasticLayout start{2, 2, {5, 5}};
  EXPECT_EQ(next_elastic_layout(equal_blocks(10), 0, start, 15), start);
}

TEST(ElasticPlan, APipelineHalvesOnlyOnceTheHalvedOneIsNoSlowerThanAtTheStart) {
  const ElasticLayout start{2, 2, {5, 5}};  // slowest stage 15 ms at the start
  // Five frozen: one stage would cost 5 + 15 = 20 ms.
  EXPECT_EQ(next_elastic_layout(equal_blocks(10), 5, start, 15), start);
  // Nine frozen: 9 + 3 = 12 ms, within 15: every rank a whole model.
  EXPECT_EQ(next_elastic_layout(equal_blocks(10), 9, start, 15), (ElasticLayout{1, 4, {10}}));
}

TEST(ElasticPlan, AFourStagePipelineHalvesAsFarAsTheBudgetAllows) {
  const ElasticLayout start{4, 1, {2, 2, 2, 2}};  // 6 ms a stage
  // Four frozen: two stages would be 7 + 9 at best.
  EXPECT_EQ(next_elastic_layout(equal_blocks(8), 4, start, 6), start);
  // Seven frozen: [1x7, 3] cut 5 + 3 is 5 ms a stage; one stage (10 ms) is too slow.
  EXPECT_EQ(next_elastic_layout(equal_blocks(8), 7, start, 6), (ElasticLayout{2, 2, {5, 3}}));
  // From there, with the budget of the start, it stays.
  EXPECT_EQ(next_elastic_layout(equal_blocks(8), 7, {2, 2, {5, 3}}, 6),
            (ElasticLayout{2, 2, {5, 3}}));
}

TEST(ElasticPlan, AnOddPipelineIsNeverHalved) {
  const ElasticLayout start{3, 1, {3, 3, 3}};
  EXPECT_EQ(next_elastic_layout(equal_blocks(9), 8, start, 9), start);
}

TEST(ElasticPlan, DescribesStagesReplicasAndTheCut) {
  EXPECT_EQ((ElasticLayout{2, 2, {5, 3}}).describe(), "2x2 [5+3]");
}

}  // namespace
}  // namespace flotilla
