#include "batch_loader.h"

#include <ATen/Parallel.h>

#include <numeric>
#include <random>

namespace flotilla::data {

LoaderOptions training_loader_options(const ExperimentConfig& config, int64_t replica,
                                      int64_t replicas, bool augment) {
  return {config.batch_size, replica, replicas, config.seed, true, augment};
}

LoaderOptions evaluation_loader_options(const ExperimentConfig& config, int64_t replica,
                                        int64_t replicas) {
  return {std::max<int64_t>(config.batch_size, 500), replica, replicas, config.seed, false, false};
}

BatchLoader::Crop BatchLoader::draw_crop(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> offset(0, 8);
  std::bernoulli_distribution flip(0.5);
  Crop crop;
  crop.top = offset(rng);
  crop.left = offset(rng);
  crop.flip = flip(rng);
  return crop;
}

bool BatchLoader::augments() const {
  return options_.augment && split_.images.scalar_type() == torch::kUInt8;
}

BatchLoader::BatchLoader(const Split& split, Normalization normalization, LoaderOptions options)
    : split_(split), normalization_(std::move(normalization)), options_(options) {
  if (!normalization_.mean.empty()) {
    const auto channels = static_cast<int64_t>(normalization_.mean.size());
    mean_ = torch::tensor(normalization_.mean, torch::kFloat32).view({1, channels, 1, 1});
    stddev_ = torch::tensor(normalization_.stddev, torch::kFloat32).view({1, channels, 1, 1});
  }
}

BatchLoader::~BatchLoader() {
  stop_worker();
}

int64_t BatchLoader::batches_per_epoch() const {
  return (shard_size() + options_.batch_size - 1) / options_.batch_size;
}

std::vector<int64_t> BatchLoader::shard_indices(int64_t epoch) const {
  std::vector<int64_t> order(split_.size());
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) {
    // Every rank shuffles with the same seed, so the shards are disjoint.
    std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
    std::shuffle(order.begin(), order.end(), rng);
  }
  std::vector<int64_t> shard;
  shard.reserve(shard_size());
  for (int64_t k = 0; k < shard_size(); ++k)
    shard.push_back(order[k * options_.world_size + options_.rank]);
  return shard;
}

void BatchLoader::stop_worker() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
  std::lock_guard lock(mutex_);
  stop_ = false;
  ready_.clear();
  error_ = nullptr;
}

void BatchLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  stop_worker();  // joins the previous epoch's worker: one worker at a time
  {
    std::lock_guard lock(mutex_);
    producing_done_ = false;
  }
  worker_ = std::thread([this, epoch, first_batch] { produce(epoch, first_batch); });
}

void BatchLoader::produce(int64_t epoch, int64_t first_batch) {
  // A new thread starts with OpenMP's default team size (every core), not the
  // rank's: take the rank's, so that batching never adds a pool of its own.
  at::init_num_threads();
  try {
    const auto shard = shard_indices(epoch);
    std::mt19937_64 rng(options_.seed ^ (static_cast<uint64_t>(options_.rank) << 32) ^
                        static_cast<uint64_t>(epoch) * 0xBF58476D1CE4E5B9ull);
    const size_t skipped = std::min(
        shard.size(), static_cast<size_t>(std::max<int64_t>(first_batch, 0) * options_.batch_size));
    // The skipped samples' augmentation draws, so that the rest get theirs.
    if (augments())
      for (size_t i = 0; i < skipped; ++i) draw_crop(rng);
    for (size_t begin = skipped; begin < shard.size(); begin += options_.batch_size) {
      const size_t end = std::min(shard.size(), begin + static_cast<size_t>(options_.batch_size));
      Batch batch = build({shard.begin() + begin, shard.begin() + end}, rng);
      std::unique_lock lock(mutex_);
      changed_.wait(
          lock, [&] { return stop_ || static_cast<int64_t>(ready_.size()) < options_.prefetch; });
      if (stop_) break;
      ready_.push_back(std::move(batch));
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  std::lock_guard lock(mutex_);
  producing_done_ = true;
  changed_.notify_all();
}

std::optional<Batch> BatchLoader::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || producing_done_; });
  if (!ready_.empty()) {
    Batch batch = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
    return batch;
  }
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

Batch BatchLoader::build(const std::vector<int64_t>& indices, std::mt19937_64& rng) const {
  auto index = torch::tensor(indices, torch::kInt64);
  auto targets = split_.labels.index_select(0, index);
  torch::Tensor inputs;
  if (split_.images.scalar_type() != torch::kUInt8) {
    // A synthetic pool: float samples or int64 token ids, used as they are.
    inputs = split_.images.index_select(0, index.remainder(split_.images.size(0)));
  } else {
    inputs = split_.images.index_select(0, index).to(torch::kFloat32).div_(255.0f);
    if (options_.augment) {
      // Random crop with 4 pixels of zero padding, then a horizontal flip with
      // probability 0.5: the seeds' torchvision transforms, per sample.
      const int64_t h = inputs.size(2), w = inputs.size(3);
      auto padded = torch::constant_pad_nd(inputs, {4, 4, 4, 4}, 0);
      for (int64_t i = 0; i < inputs.size(0); ++i) {
        const Crop c = draw_crop(rng);
        auto crop = padded[i].narrow(1, c.top, h).narrow(2, c.left, w);
        inputs[i].copy_(c.flip ? crop.flip({2}) : crop);
      }
    }
    if (mean_.defined()) inputs.sub_(mean_).div_(stddev_);
  }
  return {inputs, targets, index};
}

}  // namespace flotilla::data
