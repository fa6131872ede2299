#pragma once

#include <torch/torch.h>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

struct DataShape {
  std::vector<int64_t> sample;  // one sample without the batch dimension
  int64_t classes = 10;
  int64_t vocab = 0;  // above 0: samples are int64 token ids below it, sample = {length}
};

// The configured model as an ordered list of blocks (model_block_count() of them).
// Throws ConfigError naming the key when the model cannot take the data.
torch::nn::Sequential build_model(const ExperimentConfig& config, const DataShape& shape);

int64_t parameter_count(const torch::nn::Module& model, bool trainable_only = false);

}  // namespace flotilla
