#pragma once
// A data set in memory: the training and test splits, the sample shape, and
// how to normalise it. Images stay uint8 until a batch is built.

#include <torch/torch.h>

#include "flotilla/protocol/experiment_config.h"
#include "models/model_factory.h"

namespace flotilla::data {

struct Split {
  // uint8 [N, C, H, W] for image files. For synthetic data a pool of
  // distinct samples that sample i reuses as i % pool: float samples, or
  // int64 token ids [pool, length].
  torch::Tensor images;
  torch::Tensor labels;  // int64 [N]
  int64_t size() const { return labels.size(0); }
};

struct Normalization {
  std::vector<double> mean, stddev;  // per channel; empty: none (synthetic data)
};

struct Dataset {
  Split train, test;
  DataShape shape;
  Normalization normalization;
  bool augment = false;  // random crop with padding 4 and horizontal flip
};

// The sample shape and classes of the config's data set, without reading it:
// what models are built for before (or without) the data. IDX images are
// taken as 28x28, as the config's validator takes them; load_dataset reads
// the files' own size.
DataShape expected_shape(const ExperimentConfig& config);

// Loads what the config names; throws std::runtime_error naming a missing or bad file.
Dataset load_dataset(const ExperimentConfig& config);

}  // namespace flotilla::data
