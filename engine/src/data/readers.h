#pragma once
// Readers for the on-disk formats the studies use. Each throws
// std::runtime_error naming the file and what was expected.

#include <torch/torch.h>

#include <filesystem>

namespace flotilla::data {

// IDX (MNIST, Fashion-MNIST), gzipped or not: uint8 tensor of the file's dims.
torch::Tensor read_idx(const std::filesystem::path& file);

struct LabelledImages {
  torch::Tensor images;  // uint8 [N, 3, 32, 32]
  torch::Tensor labels;  // int64 [N]
};

// CIFAR binary: records of `label_bytes` label bytes (1 for CIFAR-10, 2 for
// CIFAR-100, where the last is the fine label) and 3072 pixel bytes.
LabelledImages read_cifar(const std::vector<std::filesystem::path>& files, int label_bytes);

}  // namespace flotilla::data
