// elastic.pipe + elastic.dp (PipeTransformer's AutoPipe and AutoDP, seed 000)
// through real flotilla-train processes: a 2-stage, 2-replica ViT pipeline
// whose first five of six blocks freeze at step 6 becomes four replicas of the
// whole model, trains on as the fixed pipeline does, and fails in words when
// a rank is lost in the middle of the change.
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "run_helpers.h"
#include "tiny_vit.h"

namespace flotilla::testing {
namespace {

constexpr int64_t kTransitionStep = 6;
constexpr int64_t kSteps = 16;  // 2 epochs of 128 samples a replica, 16 a step

// Each step's loss over the whole global batch: the mean of the replicas'
// losses (every replica's batch is the same size).
std::map<int64_t, double> global_losses(const std::vector<nlohmann::json>& records) {
  std::map<int64_t, std::pair<double, int>> sums;
  for (const auto& step : of_type(records, "step"))
    if (step.contains("loss")) {
      auto& [sum, count] = sums[step["step"].get<int64_t>()];
      sum += step["loss"].get<double>();
      ++count;
    }
  std::map<int64_t, double> mean;
  for (const auto& [step, sum] : sums) mean[step] = sum.first / sum.second;
  return mean;
}

TEST(ElasticPipeline, GoesFromTwoByTwoToFourByOneAsItsPrefixFreezesAndTrainsOnAsTheFixedOneWould) {
  TempDir fixed_dir, elastic_dir;
  const auto fixed = run_train_ranks(fixed_dir, tiny_vit_pipeline_ddp(""), 4);
  const auto elastic =
      run_train_ranks(elastic_dir, tiny_vit_pipeline_ddp("elastic: {pipe: true, dp: true}\n"), 4);
  ASSERT_EQ(fixed.exit_code, 0) << fixed.stderr_text;
  ASSERT_EQ(elastic.exit_code, 0) << elastic.stderr_text;

  // One transition record a rank, before step 6: 2 stages x 2 replicas to
  // four whole-model replicas of 8 samples (the global 32 re-split), in one
  // micro-batch of 8 as before, every block's state received from its trainer.
  const auto transitions = of_type(elastic.records, "transition");
  ASSERT_EQ(transitions.size(), 4u) << elastic.stderr_text;
  for (const auto& t : transitions) {
    const int64_t rank = t["rank"];
    EXPECT_EQ(t["step"], kTransitionStep) << t;
    EXPECT_EQ(t["frozen_blocks"], 5) << t;
    EXPECT_EQ(t["from_stages"], 2) << t;
    EXPECT_EQ(t["from_replicas"], 2) << t;
    EXPECT_EQ(t["to_stages"], 1) << t;
    EXPECT_EQ(t["to_replicas"], 4) << t;
    EXPECT_EQ(t["from_balance"], nlohmann::json::array({3, 3})) << t;
    EXPECT_EQ(t["balance"], nlohmann::json::array({6})) << t;
    EXPECT_EQ(t["stage"], 0) << t;
    EXPECT_EQ(t["replica"], rank) << t;
    EXPECT_EQ(t["batch_per_replica"], 8) << t;
    EXPECT_EQ(t["chunks"], 1) << t;
    EXPECT_GT(t["bytes_moved"].get<int64_t>(), 0) << t;
  }
  EXPECT_NE(elastic.stderr_text.find("elastic transition before step 6 from 2x2 [3+3] to 1x4 [6]"),
            std::string::npos)
      << elastic.stderr_text;

  // Before: each rank its stage of its replica; after: every rank a whole
  // model computing its own loss, none idle, the global batch still 32.
  std::map<int64_t, int64_t> steps_of_rank;
  for (const auto& step : of_type(elastic.records, "step")) {
    const int64_t rank = step["rank"], n = step["step"];
    ++steps_of_rank[rank];
    EXPECT_EQ(step["samples"], 32) << step;
    if (n < kTransitionStep) {
      EXPECT_EQ(step["stage"], rank % 2) << step;
      EXPECT_EQ(step["replica"], rank / 2) << step;
    } else {
      EXPECT_EQ(step["stage"], 0) << step;
      EXPECT_EQ(step["replica"], rank) << step;
      EXPECT_TRUE(step.contains("loss")) << step;
      EXPECT_GT(step["busy_ms"].get<double>(), 0.0) << step;
    }
  }
  for (int64_t rank = 0; rank < 4; ++rank) EXPECT_EQ(steps_of_rank[rank], kSteps) << rank;

  // Until the transition the elastic run is the fixed pipeline bit for bit;
  // after it, the same global batches train the same parameters, so the
  // loss goes on as the fixed run's does (to rounding: other batch shapes).
  const auto fixed_loss = global_losses(fixed.records);
  const auto elastic_loss = global_losses(elastic.records);
  ASSERT_EQ(fixed_loss.size(), size_t(kSteps));
  ASSERT_EQ(elastic_loss.size(), size_t(kSteps));
  for (const auto& [step, loss] : fixed_loss) {
    if (step < kTransitionStep)
      EXPECT_EQ(elastic_loss.at(step), loss) << "step " << step;
    else
      EXPECT_NEAR(elastic_loss.at(step), loss, 1e-6 * loss) << "step " << step;
  }
  // And the epochs' accuracy is counted over every sample once.
  for (const auto& epoch : of_type(elastic.records, "epoch")) {
    EXPECT_GE(epoch["acc_train"].get<double>(), 0.0);
    EXPECT_LE(epoch["acc_train"].get<double>(), 1.0);
  }
}

TEST(ElasticPipeline, ARankKilledInTheMiddleOfTheTransitionFailsEveryRankNamingIt) {
  TempDir dir;
  const auto started = std::chrono::steady_clock::now();
  TrainRun run;
  {
    InjectedFault lost("2:transition");
    run = run_train_ranks(dir, tiny_vit_pipeline_ddp("elastic: {pipe: true, dp: true}\n"), 4);
  }
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_NE(run.exit_code, 0);
  // Rank 2's last words are the transition it began; the ranks left in its
  // collectives fail naming it too, and none waits for its collective timeout.
  EXPECT_NE(run.stderr_text.find("rank 2: elastic transition before step 6 from 2x2 [3+3] to 1x4 "
                                 "[6] begins"),
            std::string::npos)
      << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("the elastic transition before step 6 from 2x2 [3+3] to 1x4 [6] "
                                 "failed"),
            std::string::npos)
      << run.stderr_text;
  EXPECT_EQ(run.stderr_text.find("[6] done"), std::string::npos) << run.stderr_text;
  EXPECT_LT(took, std::chrono::seconds(30)) << "a rank waited for a lost peer";
  for (const auto& t : of_type(run.records, "transition")) ADD_FAILURE() << "completed: " << t;
}

}  // namespace
}  // namespace flotilla::testing
