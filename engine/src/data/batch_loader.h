#pragma once
// Builds batches of one rank's shard on a background thread so that loading
// overlaps compute, as a DataLoader with workers and a DistributedSampler do.

#include <torch/torch.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "dataset.h"

namespace flotilla::data {

struct Batch {
  torch::Tensor inputs;  // float, normalised (or int64 token ids), on the CPU
  torch::Tensor targets;
  torch::Tensor indices;  // int64: each sample's index in its split
};

struct LoaderOptions {
  int64_t batch_size = 64;
  int64_t rank = 0;
  int64_t world_size = 1;
  uint64_t seed = 0;
  bool shuffle = true;
  bool augment = false;
  int64_t prefetch = 3;  // batches built ahead
};

// What a rank of `replicas` data-parallel replicas loads, as replica `replica`:
// its shuffled shard of the training split in batches of batch_size, and of
// the test split in batches of at least 500, in order.
LoaderOptions training_loader_options(const ExperimentConfig& config, int64_t replica,
                                      int64_t replicas, bool augment);
LoaderOptions evaluation_loader_options(const ExperimentConfig& config, int64_t replica,
                                        int64_t replicas);

class BatchLoader {
 public:
  BatchLoader(const Split& split, Normalization normalization, LoaderOptions options);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Starts building the batches of `epoch` from its batch `first_batch` on
  // (a resumed run's position), exactly as they come after the earlier
  // ones; a previous epoch's are dropped.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the epoch, or nothing when it is over. Blocks only while
  // the background thread is behind; rethrows what it threw.
  std::optional<Batch> next();

  // Every rank gets the same number of samples: the data set is cut to a
  // multiple of world_size, as DistributedSampler(drop_last=True) does.
  int64_t shard_size() const { return split_.size() / options_.world_size; }
  int64_t batches_per_epoch() const;
  // The sample indices this rank reads in `epoch`, in order.
  std::vector<int64_t> shard_indices(int64_t epoch) const;

 private:
  void produce(int64_t epoch, int64_t first_batch);
  // One sample's augmentation: crop offsets into the padded image and a flip.
  struct Crop {
    int64_t top = 0, left = 0;
    bool flip = false;
  };
  static Crop draw_crop(std::mt19937_64& rng);
  bool augments() const;  // images (not a synthetic pool) with augment on
  Batch build(const std::vector<int64_t>& indices, std::mt19937_64& rng) const;
  void stop_worker();

  const Split& split_;
  Normalization normalization_;
  LoaderOptions options_;
  torch::Tensor mean_, stddev_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  bool producing_done_ = true;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace flotilla::data
