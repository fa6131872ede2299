#include "dataset.h"

#include <stdexcept>

#include "readers.h"

namespace flotilla::data {
namespace {

Split idx_split(const std::vector<std::filesystem::path>& images_and_labels) {
  auto images = read_idx(images_and_labels.at(0));
  auto labels = read_idx(images_and_labels.at(1));
  if (images.dim() != 3 || labels.dim() != 1 || images.size(0) != labels.size(0))
    throw std::runtime_error(images_and_labels[0].string() +
                             ": expected N images of HxW beside N labels, got " +
                             std::to_string(images.size(0)) + " images and " +
                             std::to_string(labels.size(0)) + " labels");
  return {images.unsqueeze(1), labels.to(torch::kInt64)};
}

Split cifar_split(const std::vector<std::filesystem::path>& files, int label_bytes) {
  auto data = read_cifar(files, label_bytes);
  return {data.images, data.labels};
}

// A pool of distinct samples keeps memory bounded for any shape and count.
constexpr int64_t kSyntheticPool = 256;

Split synthetic_split(const SyntheticConfig& s, int64_t samples, uint64_t seed) {
  const int64_t pool = std::min<int64_t>(samples, kSyntheticPool);
  auto gen = at::detail::createCPUGenerator(seed);
  std::vector<int64_t> pool_shape{pool};
  pool_shape.insert(pool_shape.end(), s.shape.begin(), s.shape.end());
  return {torch::randn(pool_shape, gen, torch::kFloat32),
          torch::randint(s.classes, {samples}, gen, torch::kInt64)};
}

// Token sequences whose class can be learnt, so that a short run's loss
// falls: token 0 starts every sequence (RoBERTa's <s>, where the classifier
// reads), each class owns one keyword token, and a sequence of class c holds
// c's keyword at about one position in eight (at least one) and filler
// tokens, never a keyword, elsewhere. The label is the class whose keyword
// occurs; the classifier has to attend to find it. Keywords come from the
// run's seed, shared by both splits; the sequences from the split's seed.
Split synthetic_token_split(const SyntheticConfig& s, int64_t samples, uint64_t keyword_seed,
                            uint64_t split_seed) {
  const int64_t pool = std::min<int64_t>(samples, kSyntheticPool);
  const int64_t length = s.shape.at(0);
  auto keyword_gen = at::detail::createCPUGenerator(keyword_seed);
  // Ids 1..vocab-1 in a seeded order: the first `classes` are the keywords.
  auto ids = torch::randperm(s.vocab - 1, keyword_gen, torch::kInt64) + 1;
  auto keywords = ids.narrow(0, 0, s.classes);
  auto filler_ids = ids.narrow(0, s.classes, s.vocab - 1 - s.classes);

  auto gen = at::detail::createCPUGenerator(split_seed);
  auto pool_labels = torch::randint(s.classes, {pool}, gen, torch::kInt64);
  auto filler =
      filler_ids.index({torch::randint(filler_ids.size(0), {pool, length}, gen, torch::kInt64)});
  auto marked = torch::rand({pool, length}, gen) < 0.125;
  marked.scatter_(1, torch::randint(1, length, {pool, 1}, gen, torch::kInt64), true);
  marked.select(1, 0).fill_(false);
  auto tokens = torch::where(marked, keywords.index({pool_labels}).unsqueeze(1), filler);
  tokens.select(1, 0).fill_(0);
  // Sample i is pool entry i % pool, label included.
  auto entry = torch::arange(samples, torch::kInt64).remainder(pool);
  return {tokens, pool_labels.index({entry})};
}

}  // namespace

DataShape expected_shape(const ExperimentConfig& c) {
  switch (c.dataset) {
    case DatasetKind::fashion_mnist:
    case DatasetKind::mnist:
      return {{1, 28, 28}, 10};
    case DatasetKind::cifar10:
      return {{3, 32, 32}, 10};
    case DatasetKind::cifar100:
      return {{3, 32, 32}, 100};
    case DatasetKind::synthetic:
      break;
  }
  return {c.synthetic.shape, c.synthetic.classes, c.synthetic.vocab};
}

Dataset load_dataset(const ExperimentConfig& c) {
  if (auto problems = data_file_problems(c); !problems.empty()) throw ConfigError(problems);
  const auto files = data_files(c);
  Dataset d;
  switch (c.dataset) {
    case DatasetKind::fashion_mnist:
    case DatasetKind::mnist:
      d.train = idx_split(files.train);
      d.test = idx_split(files.test);
      d.shape = {{1, d.train.images.size(2), d.train.images.size(3)}, 10};
      d.normalization = c.dataset == DatasetKind::mnist ? Normalization{{0.1307}, {0.3081}}
                                                        : Normalization{{0.2860}, {0.3530}};
      break;
    case DatasetKind::cifar10:
      d.train = cifar_split(files.train, 1);
      d.test = cifar_split(files.test, 1);
      d.shape = expected_shape(c);
      // Mean and deviation as the seed studies normalise.
      d.normalization = {{0.4914, 0.4822, 0.4465}, {0.2023, 0.1994, 0.2010}};
      d.augment = c.augment;
      break;
    case DatasetKind::cifar100:  // two label bytes: coarse, then the fine label used
      d.train = cifar_split(files.train, 2);
      d.test = cifar_split(files.test, 2);
      d.shape = expected_shape(c);
      d.normalization = {{0.5071, 0.4865, 0.4409}, {0.2673, 0.2564, 0.2762}};
      d.augment = c.augment;
      break;
    case DatasetKind::synthetic:
      if (c.synthetic.vocab > 0) {
        // The keywords' generator is seeded apart (~seed) from the splits'.
        d.train = synthetic_token_split(c.synthetic, c.synthetic.train_samples, ~c.seed, c.seed);
        d.test = synthetic_token_split(c.synthetic, c.synthetic.test_samples, ~c.seed, c.seed + 1);
      } else {
        d.train = synthetic_split(c.synthetic, c.synthetic.train_samples, c.seed);
        d.test = synthetic_split(c.synthetic, c.synthetic.test_samples, c.seed + 1);
      }
      d.shape = expected_shape(c);
      break;
  }
  const int64_t max_label = d.train.labels.max().item<int64_t>();
  if (max_label >= d.shape.classes)
    throw std::runtime_error(resolved_data_dir(c).string() + ": label " +
                             std::to_string(max_label) + " is out of range for " +
                             std::to_string(d.shape.classes) + " classes");
  return d;
}

}  // namespace flotilla::data
