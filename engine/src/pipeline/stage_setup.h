#pragma once
// Cutting a built model into a pipeline stage on every rank alike: the
// balance (given, or measured on rank 0 and broadcast), the shapes that
// cross each boundary, and the stage's own blocks.

#include <torch/torch.h>

#include <vector>

#include "comm/communicator.h"

namespace flotilla {

// Forward + backward milliseconds of each block on `example` (eval mode, so
// that batch statistics are left alone), the median of a few repetitions.
std::vector<double> measure_block_ms(torch::nn::Sequential& model, const torch::Tensor& example);

// `balance` when given, else rank 0's measurement cut by balance_by_cost and
// broadcast, so that every rank cuts alike.
std::vector<int64_t> resolve_balance(std::vector<int64_t> balance, int64_t stages,
                                     torch::nn::Sequential& model, const torch::Tensor& example,
                                     Communicator& comm);

// Per-sample shape of each stage's output but the last's.
std::vector<std::vector<int64_t>> boundary_shapes(torch::nn::Sequential& model,
                                                  const torch::Tensor& example,
                                                  const std::vector<int64_t>& balance);

// Stage `stage`'s blocks: the same modules, shared with `model`.
torch::nn::Sequential stage_blocks(const torch::nn::Sequential& model,
                                   const std::vector<int64_t>& balance, int64_t stage);

}  // namespace flotilla
