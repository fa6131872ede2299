#pragma once
// Cutting a built model into a pipeline stage on every rank alike: the
// balance (given, or measured on rank 0 and broadcast), the shapes that
// cross each boundary, and the stage's own blocks.

#include <torch/torch.h>

#include <vector>

#include "comm/communicator.h"
#include "flotilla/protocol/experiment_config.h"
#include "pipeline/elastic_plan.h"

namespace flotilla {

// From the first evaluation batch (`samples`): what rank 0 times each block
// on, one micro-batch of batch_size / chunks samples; and what the boundary
// shapes are found with, one sample.
torch::Tensor measuring_example(const torch::Tensor& samples, const ExperimentConfig& config);
torch::Tensor shape_example(const torch::Tensor& samples);

// Forward + backward milliseconds of each block on `example` (eval mode, so
// that batch statistics are left alone), the median of a few repetitions.
std::vector<double> measure_block_ms(torch::nn::Sequential& model, const torch::Tensor& example);

// Forward alone and forward + backward milliseconds of each block on
// `example`, as measure_block_ms times them: what AutoPipe weighs frozen and
// training blocks by.
std::vector<BlockCost> measure_block_costs(torch::nn::Sequential& model,
                                           const torch::Tensor& example);
// Rank 0's measure_block_costs, broadcast so that every rank decides alike.
std::vector<BlockCost> shared_block_costs(torch::nn::Sequential& model,
                                          const torch::Tensor& example, Communicator& comm);

// The cut that minimises the slowest stage of measure_block_ms's times: what
// rank 0 computes when no balance is given.
// `block_ms`, when given, receives the times it was cut by.
std::vector<int64_t> measured_balance(torch::nn::Sequential& model, const torch::Tensor& example,
                                      int64_t stages, std::vector<double>* block_ms = nullptr);

// `balance` when given, else rank 0's measured_balance, broadcast so that
// every rank cuts alike.
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
