// AutoCache (elastic.cache, issue 24): the frozen prefix's outputs per
// training sample, kept in memory and in the run folder's file, read back
// exactly, and a training run that reads them instead of recomputing.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "flotilla/engine/training.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/metric_records.h"
#include "flotilla/protocol/record_reading.h"
#include "freeze/prefix_cache.h"
#include "models/layers.h"
#include "models/model_factory.h"

namespace flotilla {
namespace {

torch::Tensor indices_of(std::vector<int64_t> values) {
  return torch::tensor(values, torch::kInt64);
}

// Samples i of [100, 4, 3] whose every value tells its index.
torch::Tensor outputs_of(const std::vector<int64_t>& indices) {
  auto out = torch::empty({int64_t(indices.size()), 4, 3});
  for (size_t i = 0; i < indices.size(); ++i)
    out[int64_t(i)] = torch::arange(12, torch::kFloat32).reshape({4, 3}) + 100.0 * indices[i];
  return out;
}

constexpr int64_t kSampleBytes = 4 * 3 * 4;

TEST(PrefixCache, ReadsBackWhatItKeptInMemoryAndInItsFile) {
  // Room in memory for 5 samples: the rest go to the file.
  PrefixCache cache(100, 5 * kSampleBytes, std::filesystem::temp_directory_path());
  cache.set_blocks(2);
  const std::vector<int64_t> first{7, 3, 50, 99}, second{0, 3, 42, 8, 61, 12};
  cache.store(indices_of(first), outputs_of(first));
  cache.store(indices_of(second), outputs_of(second));
  EXPECT_EQ(cache.cached_samples(), 9);  // sample 3 once
  EXPECT_EQ(cache.memory_slots(), 5);
  EXPECT_EQ(cache.spilled_samples(), 4);

  // In another order, from memory and the file alike.
  const std::vector<int64_t> asked{61, 7, 12, 99, 0, 3, 42, 8, 50};
  const auto read = cache.lookup(indices_of(asked));
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(torch::equal(*read, outputs_of(asked)));
  // One sample never stored: nothing, not a batch with a hole.
  EXPECT_FALSE(cache.lookup(indices_of({7, 13})).has_value());
}

TEST(PrefixCache, ForgetsEverythingWhenThePrefixChanges) {
  PrefixCache cache(10, 1 << 20, std::filesystem::temp_directory_path());
  cache.set_blocks(1);
  cache.store(indices_of({1, 2}), outputs_of({1, 2}));
  ASSERT_TRUE(cache.lookup(indices_of({1, 2})).has_value());
  cache.set_blocks(1);  // the same prefix: kept
  EXPECT_TRUE(cache.lookup(indices_of({2})).has_value());
  cache.set_blocks(3);
  EXPECT_FALSE(cache.lookup(indices_of({1})).has_value());
  EXPECT_EQ(cache.cached_samples(), 0);
  // A prefix of another output shape is laid out afresh.
  cache.store(indices_of({1}), torch::ones({1, 7}));
  EXPECT_TRUE(torch::equal(*cache.lookup(indices_of({1})), torch::ones({1, 7})));
}

TEST(PrefixCache, AnUnwritableFolderIsNamedInTheError) {
  PrefixCache cache(10, 0, "/proc/self");  // no room in memory: the first sample goes to a file
  cache.set_blocks(1);
  try {
    cache.store(indices_of({1}), outputs_of({1}));
    FAIL() << "stored into /proc/self";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("elastic.cache: cannot make the cache's file in /proc/self"),
        std::string::npos)
        << e.what();
  }
}

// With batch norm in evaluation mode a frozen block is one function of each
// sample: an output kept from one batch is what recomputing it in a batch of
// other samples, in another order, gives.
TEST(PrefixCache, KeptOutputsEqualTheFrozenBlocksRecomputedInOtherBatches) {
  auto config = parse_experiment(
      "model: small_cnn\ndataset: synthetic\nsynthetic: {shape: [1, 28, 28]}\nseed: 1\n");
  torch::manual_seed(1);
  auto model = build_model(config, data::expected_shape(config));
  const int64_t prefix = 2;
  for (int64_t b = 0; b < prefix; ++b) (model->begin() + b)->ptr()->eval();
  torch::NoGradGuard no_grad;
  const auto inputs = torch::randn({64, 1, 28, 28});

  PrefixCache cache(64, 16 * 1024, std::filesystem::temp_directory_path());
  cache.set_blocks(prefix);
  for (int64_t start = 0; start < 64; start += 16) {
    const auto index = torch::arange(start, start + 16, torch::kInt64);
    cache.store(index, models::forward_blocks(model, 0, prefix, inputs.index_select(0, index)));
  }
  ASSERT_GT(cache.spilled_samples(), 0);
  const auto shuffled = torch::randperm(64, torch::kInt64).narrow(0, 0, 24);
  const auto read = cache.lookup(shuffled);
  ASSERT_TRUE(read.has_value());
  const auto recomputed =
      models::forward_blocks(model, 0, prefix, inputs.index_select(0, shuffled));
  EXPECT_TRUE(torch::equal(*read, recomputed))
      << "largest difference " << (*read - recomputed).abs().max().item<double>();
}

class StepLines final : public RecordSink {
 public:
  void write(std::string_view line) override {
    if (auto step = records::step_from_line(line)) steps.push_back(*step);
  }
  std::vector<records::Step> steps;
};

std::vector<records::Step> train_steps(const std::string& elastic) {
  TrainOptions options;
  options.config = parse_experiment(R"(
model: vit
vit: {patch: 4, depth: 4, dim: 32, heads: 4, mlp_dim: 64}
dataset: synthetic
synthetic: {shape: [3, 16, 16], classes: 4, train_samples: 96, test_samples: 32}
batch_size: 16
epochs: 3
freeze: {method: fixed, schedule: [{at_step: 4, blocks: 3}]}
seed: 5
threads: 1
)" + elastic);
  options.scratch_folder = std::filesystem::temp_directory_path();
  StepLines sink;
  options.sink = &sink;
  const auto result = train(options);
  EXPECT_EQ(result.outcome, records::Outcome::finished) << result.message;
  return sink.steps;
}

// ViT has no batch norm and no dropout here, so evaluation mode changes
// nothing: with and without the cache the run must be the same, step for step
// (to the rounding of a product over other rows), and from the epoch after
// the one it froze in every sample is read.
TEST(ElasticCache, ARunReadingTheCacheTrainsExactlyAsOneRecomputing) {
  const auto recomputing = train_steps("");
  const auto caching = train_steps("elastic: {cache: true, cache_mb: 1}\n");
  ASSERT_EQ(recomputing.size(), 18u);
  ASSERT_EQ(caching.size(), recomputing.size());
  int64_t read_in_last_epoch = 0, read_before = 0;
  for (size_t i = 0; i < caching.size(); ++i) {
    ASSERT_TRUE(caching[i].loss && recomputing[i].loss);
    // Equal to the last bits but for a matrix product's rounding: a sample's
    // prefix recomputed in another batch (the recomputing run's) can differ
    // in its last bit, as BLAS blocks a product by its row count.
    EXPECT_NEAR(*caching[i].loss, *recomputing[i].loss, 1e-5 * *recomputing[i].loss)
        << "step " << caching[i].step;
    EXPECT_EQ(caching[i].frozen_blocks, recomputing[i].frozen_blocks);
    EXPECT_EQ(recomputing[i].cached_samples, 0);
    (caching[i].epoch == 2 ? read_in_last_epoch : read_before) += caching[i].cached_samples;
  }
  EXPECT_EQ(read_in_last_epoch, 96);
  // Epoch 1 reads only batches whose every sample the end of epoch 0 kept.
  EXPECT_LT(read_before, 96);
}

}  // namespace
}  // namespace flotilla
