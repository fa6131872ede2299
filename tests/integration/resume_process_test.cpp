// Checkpoints and --resume through real flotilla-train processes: a run cut
// by a rank's failure goes on from the newest checkpoint every rank holds and
// trains bit for bit as the same run never stopped (CPU, one thread a rank).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "run_helpers.h"

namespace flotilla::testing {
namespace {

namespace fs = std::filesystem;

// The records each rank wrote after its last start record: the last attempt's.
std::map<int64_t, std::vector<nlohmann::json>> last_attempt(
    const std::vector<nlohmann::json>& all) {
  std::map<int64_t, std::vector<nlohmann::json>> by_rank;
  for (const auto& r : all) {
    auto& mine = by_rank[r.value("rank", int64_t{0})];
    if (r["type"] == "start") mine.clear();
    mine.push_back(r);
  }
  return by_rank;
}

struct ResumeCase {
  const char* name;
  const char* strategy;  // the config's lines past the common ones
  const char* fault;     // the rank that fails, and at which step
};

class Resume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(Resume, GoesOnBitForBitFromTheNewestCheckpointEveryRankHolds) {
  TempDir data;
  write_cifar10(data.path() / "cifar", 32, 16);  // 160 training images, augmented
  const std::string config = "name: resume\nmodel: small_cnn\ndataset: cifar10\ndata_dir: " +
                             (data.path() / "cifar").string() +
                             "\nbatch_size: 16\nepochs: 3\nthreads: 1\nseed: 5\ndropout: 0.2\n"
                             "save: {every_steps: 4, keep: 2}\n" +
                             GetParam().strategy;
  TempDir whole_dir, cut_dir;
  const auto whole = run_train_ranks(whole_dir, config, 2);
  ASSERT_EQ(whole.exit_code, 0) << whole.stderr_text;
  {
    InjectedFault fault(GetParam().fault);  // fails at step 11, after the saves of 4 and 8
    const auto cut = run_train_ranks(cut_dir, config, 2);
    ASSERT_NE(cut.exit_code, 0) << "the injected fault did not end the run";
  }
  const fs::path saved = cut_dir.path() / "checkpoints";
  ASSERT_TRUE(fs::exists(saved / "step-000000008" / "rank-1.pt"));
  EXPECT_TRUE(fs::exists(saved / "step-000000004"))  // keep: 2
      << "steps 4 and 8 are kept";
  // A newer step that only rank 0 finished writing when the node died: rank
  // 1's file never got its name. Neither is used.
  fs::create_directories(saved / "step-000000012");
  fs::copy_file(saved / "step-000000008" / "rank-0.pt", saved / "step-000000012" / "rank-0.pt");
  {
    std::ofstream half(saved / "step-000000012" / "rank-1.pt.partial", std::ios::binary);
    half << "PK\x03\x04 cut short";
  }

  const auto resumed = run_train_ranks(cut_dir, config, 2, "--resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.stderr_text;
  const auto after = last_attempt(resumed.records);
  const auto before = last_attempt(whole.records);
  ASSERT_EQ(after.size(), 2u);
  for (const auto& [rank, records] : after) {
    ASSERT_EQ(records.front()["type"], "start");
    EXPECT_EQ(records.front().value("resumed_from_step", int64_t{0}), 8) << rank;
    // Every step from 9 on, and every epoch from the one step 9 is in.
    std::vector<nlohmann::json> resumed_steps, whole_steps, resumed_epochs, whole_epochs;
    for (const auto& r : records) {
      if (r["type"] == "step") resumed_steps.push_back(r);
      if (r["type"] == "epoch") resumed_epochs.push_back(r);
    }
    ASSERT_FALSE(resumed_steps.empty()) << rank;
    const int64_t first_epoch = resumed_steps.front()["epoch"];
    for (const auto& r : before.at(rank)) {
      if (r["type"] == "step" && r["step"].get<int64_t>() > 8) whole_steps.push_back(r);
      if (r["type"] == "epoch" && r["epoch"].get<int64_t>() >= first_epoch)
        whole_epochs.push_back(r);
    }
    ASSERT_EQ(resumed_steps.size(), whole_steps.size()) << rank;
    for (size_t i = 0; i < whole_steps.size(); ++i) {
      EXPECT_EQ(resumed_steps[i]["step"], whole_steps[i]["step"]);
      EXPECT_EQ(resumed_steps[i]["lr"], whole_steps[i]["lr"]);
      // Bit for bit: the same double, not a close one.
      EXPECT_EQ(resumed_steps[i].value("loss", -1.0), whole_steps[i].value("loss", -1.0))
          << "rank " << rank << " step " << whole_steps[i]["step"];
    }
    ASSERT_EQ(resumed_epochs.size(), whole_epochs.size()) << rank;
    for (size_t i = 0; i < whole_epochs.size(); ++i)
      for (const char* key : {"epoch", "steps", "loss", "acc_train", "acc_test"})
        EXPECT_EQ(resumed_epochs[i][key], whole_epochs[i][key]) << key << " of " << whole_epochs[i];
    EXPECT_EQ(records.back()["outcome"], "finished");
  }
  // The resumed run's saves replaced the planted files or removed them
  // with older steps: what is left is two whole steps, each of both ranks.
  int steps_left = 0;
  for (const auto& step : fs::directory_iterator(saved)) {
    ++steps_left;
    EXPECT_TRUE(fs::exists(step.path() / "rank-0.pt")) << step.path();
    EXPECT_TRUE(fs::exists(step.path() / "rank-1.pt")) << step.path();
    EXPECT_FALSE(fs::exists(step.path() / "rank-1.pt.partial")) << step.path();
  }
  EXPECT_EQ(steps_left, 2);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, Resume,
    ::testing::Values(
        ResumeCase{"ddp_adamw",
                   "strategy: ddp\nranks_per_node: 2\noptimizer: {name: adamw, lr: 0.002}\n",
                   "1:11"},
        ResumeCase{"gpipe_two_stages",
                   "strategy: pipeline\nranks_per_node: 2\nbalance: [2, 2]\nchunks: 2\n"
                   "optimizer: {name: sgd, lr: 0.05, momentum: 0.9}\n",
                   "0:11"}),
    [](const auto& info) { return std::string(info.param.name); });

// By time, each rank's clock would pick its own steps: rank 0's decides,
// and every step folder holds both ranks' files.
TEST(Resume, SavesByTimeAtTheSameStepsOnEveryRank) {
  TempDir dir;
  const auto run = run_train_ranks(
      dir,
      "name: by-time\nmodel: small_cnn\ndataset: synthetic\n"
      "synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 256, test_samples: 16}\n"
      "batch_size: 8\nepochs: 1\nthreads: 1\nstrategy: ddp\nranks_per_node: 2\n"
      "save: {every_minutes: 0.0005, keep: 1000}\n",  // 30 ms: most steps, not all
      2);
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  int folders = 0;
  for (const auto& step : fs::directory_iterator(dir.path() / "checkpoints")) {
    ++folders;
    EXPECT_TRUE(fs::exists(step.path() / "rank-0.pt")) << step.path();
    EXPECT_TRUE(fs::exists(step.path() / "rank-1.pt")) << step.path();
  }
  EXPECT_GE(folders, 2);
}

TEST(Resume, RefusesACheckpointOfAnotherConfigNamingTheKeys) {
  TempDir dir;
  const std::string common =
      "name: refuse\nmodel: small_cnn\ndataset: synthetic\n"
      "synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 16}\n"
      "epochs: 1\nthreads: 1\nsave: {every_steps: 2}\n";
  const auto first = run_train(dir, common + "batch_size: 16\n");
  ASSERT_EQ(first.exit_code, 0) << first.stderr_text;
  ASSERT_TRUE(fs::exists(dir.path() / "checkpoints" / "step-000000002" / "rank-0.pt"));
  const auto other =
      run_train_ranks(dir, common + "batch_size: 8\noptimizer: {lr: 0.5}\n", 1, "--resume");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.stderr_text.find("step-000000002/rank-0.pt"), std::string::npos)
      << other.stderr_text;
  EXPECT_NE(other.stderr_text.find("batch_size, optimizer.lr"), std::string::npos)
      << other.stderr_text;
  // A longer run of the same config goes on from the newest save (the last
  // step itself is not saved: it is the end).
  const auto longer = run_train_ranks(dir, common + "batch_size: 16\nepochs: 2\n", 1, "--resume");
  ASSERT_EQ(longer.exit_code, 0) << longer.stderr_text;
  const auto attempt = last_attempt(longer.records).at(0);
  EXPECT_EQ(attempt.front().value("resumed_from_step", int64_t{0}), 2);
  EXPECT_EQ(attempt.back()["steps"], 8);
}

}  // namespace
}  // namespace flotilla::testing
