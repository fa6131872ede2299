#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "data/batch_loader.h"
#include "data/dataset.h"
#include "data/readers.h"
#include "temp_dir.h"

namespace flotilla {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

// Writes `n` CIFAR records whose label (fine label for CIFAR-100) is
// (first + i) % classes and whose pixels are all equal to that label.
void write_cifar(const fs::path& file, int n, int first, int classes, int label_bytes) {
  std::ofstream out(file, std::ios::binary);
  for (int i = 0; i < n; ++i) {
    const auto label = static_cast<char>((first + i) % classes);
    if (label_bytes == 2) out.put(static_cast<char>(99 - label));  // coarse label: ignored
    out.put(label);
    std::string pixels(3072, label);
    out.write(pixels.data(), pixels.size());
  }
}

TEST(Readers, CifarRecordsRoundTrip) {
  TempDir dir;
  write_cifar(dir.path() / "a.bin", 7, 0, 10, 1);
  write_cifar(dir.path() / "b.bin", 5, 7, 10, 1);
  const auto data = data::read_cifar({dir.path() / "a.bin", dir.path() / "b.bin"}, 1);
  ASSERT_EQ(data.images.sizes(), (std::vector<int64_t>{12, 3, 32, 32}));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(data.labels[i].item<int64_t>(), i % 10);
    EXPECT_EQ(data.images[i].min().item<int>(), i % 10);
    EXPECT_EQ(data.images[i].max().item<int>(), i % 10);
  }
}

TEST(Readers, Cifar100UsesTheFineLabel) {
  TempDir dir;
  write_cifar(dir.path() / "train.bin", 4, 40, 100, 2);
  const auto data = data::read_cifar({dir.path() / "train.bin"}, 2);
  EXPECT_EQ(data.labels[3].item<int64_t>(), 43);
}

TEST(Readers, TruncatedCifarFileIsNamed) {
  TempDir dir;
  std::ofstream(dir.path() / "bad.bin") << std::string(3000, 'x');
  try {
    data::read_cifar({dir.path() / "bad.bin"}, 1);
    FAIL() << "read a truncated file";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir.path() / "bad.bin").string() +
                  ": 3000 bytes is not a whole number of 3073-byte CIFAR records");
  }
}

TEST(Readers, NonIdxFileIsNamed) {
  TempDir dir;
  std::ofstream(dir.path() / "x-idx3-ubyte") << "not idx at all";
  try {
    data::read_idx(dir.path() / "x-idx3-ubyte");
    FAIL() << "read a non-IDX file";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir.path() / "x-idx3-ubyte").string() + ": not an IDX file of unsigned bytes");
  }
}

TEST(Datasets, RealFashionMnistFromDebian) {
  ExperimentConfig c;
  c.dataset = DatasetKind::fashion_mnist;
  ASSERT_TRUE(missing_data_files(c).empty())
      << "dataset-fashion-mnist is installed by scripts/setup.sh: " << missing_data_files(c)[0];
  const auto d = data::load_dataset(c);
  EXPECT_EQ(d.train.images.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(d.test.images.sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  EXPECT_TRUE(torch::bincount(d.train.labels).eq(6000).all().item<bool>());
  EXPECT_TRUE(torch::bincount(d.test.labels).eq(1000).all().item<bool>());
  EXPECT_EQ(d.shape.sample, (std::vector<int64_t>{1, 28, 28}));
}

TEST(Datasets, CifarFolderLoadsWithAugmentation) {
  TempDir dir;
  for (int i = 1; i <= 5; ++i)
    write_cifar(dir.path() / ("data_batch_" + std::to_string(i) + ".bin"), 4, i, 10, 1);
  write_cifar(dir.path() / "test_batch.bin", 3, 0, 10, 1);
  ExperimentConfig c;
  c.dataset = DatasetKind::cifar10;
  c.data_dir = dir.path();
  const auto d = data::load_dataset(c);
  EXPECT_EQ(d.train.size(), 20);
  EXPECT_EQ(d.test.size(), 3);
  EXPECT_TRUE(d.augment);
  EXPECT_EQ(d.normalization.mean.size(), 3u);
}

ExperimentConfig token_config(uint64_t seed) {
  ExperimentConfig c;
  c.model = ModelKind::transformer_encoder;
  c.dataset = DatasetKind::synthetic;
  c.synthetic = {{24}, 3, 300, 40, 1000};  // length 24, 3 classes, vocab 1000
  c.seed = seed;
  return c;
}

TEST(Datasets, SyntheticTokensAreSeeded) {
  const auto a = data::load_dataset(token_config(5)), b = data::load_dataset(token_config(5));
  const auto other = data::load_dataset(token_config(6));
  EXPECT_TRUE(torch::equal(a.train.images, b.train.images));
  EXPECT_TRUE(torch::equal(a.train.labels, b.train.labels));
  EXPECT_FALSE(torch::equal(a.train.images, other.train.images));
  EXPECT_FALSE(torch::equal(a.train.images, a.test.images)) << "the splits differ";
  EXPECT_EQ(a.shape.sample, (std::vector<int64_t>{24}));
  EXPECT_EQ(a.shape.vocab, 1000);
  EXPECT_EQ(a.shape.classes, 3);
}

TEST(Datasets, SyntheticTokenLabelIsTheClassKeywordThatOccurs) {
  const auto d = data::load_dataset(token_config(5));
  const auto& pool = d.train.images;
  ASSERT_EQ(pool.scalar_type(), torch::kInt64);
  ASSERT_EQ(pool.sizes(), (std::vector<int64_t>{256, 24}));  // a pool of 256 distinct sequences
  ASSERT_EQ(d.train.size(), 300);
  // Sample i is pool entry i % 256, its label included.
  EXPECT_TRUE(torch::equal(d.train.labels.narrow(0, 256, 44), d.train.labels.narrow(0, 0, 44)));
  EXPECT_TRUE(pool.select(1, 0).eq(0).all().item<bool>()) << "token 0 starts every sequence";
  EXPECT_GE(pool.narrow(1, 1, 23).min().item<int64_t>(), 1);
  EXPECT_LT(pool.max().item<int64_t>(), 1000);
  // Per class, the tokens that every one of its sequences holds: the start
  // token and exactly one keyword (random filler of 997 ids is never in all).
  std::vector<int64_t> keyword;
  const auto labels = d.train.labels.narrow(0, 0, 256);
  for (int64_t c = 0; c < 3; ++c) {
    const auto rows = pool.index({labels.eq(c)});
    ASSERT_GT(rows.size(0), 10);
    auto in_all = torch::zeros({rows.size(0), 1000}, torch::kBool).scatter_(1, rows, true).all(0);
    auto common = in_all.nonzero().flatten();
    ASSERT_EQ(common.numel(), 2) << "class " << c;
    keyword.push_back(common[1].item<int64_t>());
  }
  EXPECT_EQ(std::set<int64_t>(keyword.begin(), keyword.end()).size(), 3u);
  // No sequence holds another class's keyword, in either split: the keyword
  // that occurs names the class.
  for (const auto* split : {&d.train, &d.test}) {
    const auto n = split->images.size(0);
    const auto split_labels = split->labels.narrow(0, 0, n);
    for (int64_t c = 0; c < 3; ++c) {
      const auto holds = split->images.eq(keyword[c]).any(1);
      EXPECT_TRUE(torch::equal(holds, split_labels.eq(c))) << "keyword of class " << c;
    }
  }
}

TEST(BatchLoader, TokenBatchesStayIntegerIds) {
  const auto d = data::load_dataset(token_config(1));
  data::BatchLoader loader(d.train, d.normalization, {8, 0, 1, 1});
  loader.start_epoch(0);
  auto batch = loader.next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->inputs.scalar_type(), torch::kInt64);
  EXPECT_EQ(batch->inputs.sizes(), (std::vector<int64_t>{8, 24}));
}

data::Split counting_split(int64_t n) {
  return {torch::arange(n, torch::kInt64).to(torch::kUInt8).view({n, 1, 1, 1}),
          torch::arange(n, torch::kInt64)};
}

std::vector<int64_t> drain(data::BatchLoader& loader, int64_t epoch) {
  std::vector<int64_t> labels;
  loader.start_epoch(epoch);
  while (auto batch = loader.next()) {
    auto t = batch->targets;
    labels.insert(labels.end(), t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  }
  return labels;
}

TEST(BatchLoader, RanksReadDisjointEqualShardsThatCoverTheData) {
  auto split = counting_split(103);
  std::set<int64_t> seen;
  size_t per_rank = 0;
  for (int64_t rank = 0; rank < 2; ++rank) {
    data::BatchLoader loader(split, {}, {10, rank, 2, /*seed=*/7});
    const auto labels = drain(loader, 0);
    EXPECT_EQ(static_cast<int64_t>(labels.size()), loader.shard_size());
    EXPECT_EQ(loader.batches_per_epoch(), 6);
    per_rank = labels.size();
    for (auto l : labels) EXPECT_TRUE(seen.insert(l).second) << "sample " << l << " read twice";
  }
  EXPECT_EQ(per_rank, 51u);
  EXPECT_EQ(seen.size(), 102u);  // one sample dropped so that shards are equal
}

TEST(BatchLoader, ShuffleIsSeededAndChangesPerEpoch) {
  auto split = counting_split(64);
  data::BatchLoader a(split, {}, {16, 0, 1, 3}), b(split, {}, {16, 0, 1, 3});
  EXPECT_EQ(drain(a, 0), drain(b, 0));
  EXPECT_NE(drain(a, 0), drain(a, 1));
  data::BatchLoader unshuffled(split, {}, {16, 0, 1, 3, /*shuffle=*/false});
  const auto in_order = drain(unshuffled, 0);
  EXPECT_TRUE(std::is_sorted(in_order.begin(), in_order.end()));
}

TEST(BatchLoader, InputsMatchTheirLabelsAfterNormalisation) {
  auto split = counting_split(32);
  data::BatchLoader loader(split, {{0.5}, {0.25}}, {8, 0, 1, 1});
  loader.start_epoch(0);
  auto batch = loader.next();
  ASSERT_TRUE(batch);
  auto expected = (batch->targets.to(torch::kFloat32) / 255.0 - 0.5) / 0.25;
  EXPECT_TRUE(torch::allclose(batch->inputs.flatten(), expected));
}

// A resumed run starts mid-epoch: the batches from batch k on are those a
// loader started at batch 0 gives after its first k, augmentation included.
TEST(BatchLoader, StartingAtABatchGivesTheSameBatchesAsReadingUpToIt) {
  auto images = torch::arange(40 * 3 * 8 * 8).remainder(251).to(torch::kUInt8).view({40, 3, 8, 8});
  data::Split split{images, torch::arange(40, torch::kInt64)};
  data::LoaderOptions options{6, 1, 2, /*seed=*/11};
  options.augment = true;
  data::BatchLoader whole(split, {}, options), resumed(split, {}, options);
  whole.start_epoch(2);
  std::vector<data::Batch> batches;
  while (auto b = whole.next()) batches.push_back(*b);
  ASSERT_EQ(batches.size(), 4u);  // 20 samples a rank, batches of 6
  resumed.start_epoch(2, 2);
  for (size_t i = 2; i < batches.size(); ++i) {
    auto b = resumed.next();
    ASSERT_TRUE(b) << i;
    EXPECT_TRUE(b->indices.equal(batches[i].indices)) << i;
    EXPECT_TRUE(b->inputs.equal(batches[i].inputs)) << "batch " << i << "'s crops and flips";
  }
  EXPECT_FALSE(resumed.next());
}

TEST(BatchLoader, AugmentationCropsWithZeroPaddingAndKeepsShape) {
  // A constant image: any crop keeps the value except where padding shows.
  auto images = torch::full({16, 3, 32, 32}, 255, torch::kUInt8);
  data::Split split{images, torch::zeros({16}, torch::kInt64)};
  data::LoaderOptions options{16, 0, 1, 5};
  options.augment = true;
  data::BatchLoader loader(split, {}, options);
  loader.start_epoch(0);
  auto batch = loader.next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->inputs.sizes(), images.sizes());
  const auto values = std::get<0>(at::_unique(batch->inputs));
  EXPECT_LE(values.numel(), 2);
  EXPECT_EQ(values.max().item<float>(), 1.0f);
  // With 16 random offsets in 0..8, some crop shows padding (chance that none does: 81^-16).
  EXPECT_EQ(values.min().item<float>(), 0.0f);
}

}  // namespace
}  // namespace flotilla
