#pragma once
// The optimizer step over all parameters at once. LibTorch's torch::optim
// updates one parameter at a time: a handful of small kernels per tensor,
// which on a GPU is launch-bound (issue 16: 0.53 ms against PyTorch's 0.14 ms
// foreach step on ResNet-18). Here each line of the update is one
// `_foreach_*` call over every parameter that has a gradient, with the same
// arithmetic, in the same order, as torch::optim::SGD and AdamW, so the
// result equals theirs. On a CPU, where a _foreach_ call is a loop over its
// tensors that returns new lists, SGD is faster a parameter at a time: each
// device gets the faster path (fastest_step_path), with equal results.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla::optim {

// How a step runs: each line of the update as one _foreach_ call over every
// parameter, or a loop over the parameters with the same operations (bit for
// bit the same result).
enum class StepPath { foreach, per_parameter };
// The faster path for `kind` on `device`, from optimizer_bench: on CUDA
// foreach (one launch per line instead of one per tensor: 0.14 ms against
// 0.53 ms on ResNet-18); on a CPU SGD per parameter (foreach 22-35 % slower)
// and AdamW foreach (1.95x faster on ResNet-18).
StepPath fastest_step_path(OptimizerKind kind, const torch::Device& device);

class MultiTensorOptimizer {
 public:
  // `params`: every parameter of the model; one without a gradient at a step
  // (frozen, or unused) is skipped at that step, as torch::optim does.
  MultiTensorOptimizer(const OptimizerConfig& config, std::vector<torch::Tensor> params,
                       StepPath path = StepPath::foreach);
  StepPath path() const { return path_; }

  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  void step();

  // The state a checkpoint keeps, under "optimizer.": each parameter's
  // buffers that exist (momentum.3, exp_avg.3, ...) and every step count.
  void save(torch::serialize::OutputArchive& archive) const;
  // Takes back what save() wrote for the same parameters; throws
  // std::runtime_error naming a buffer whose shape differs.
  void load(torch::serialize::InputArchive& archive);

  // One parameter's state, which moves with it when an elastic pipeline
  // hands its block to another rank: its buffers (undefined until its first
  // step; only those of this optimizer's kind) and its step count.
  struct ParameterState {
    std::vector<torch::Tensor> buffers;  // in buffer_names()'s order
    int64_t steps = 0;
  };
  // The buffers a parameter has under this optimizer's kind, by name.
  std::vector<std::string> buffer_names() const;
  // `param`'s state, found by identity among this optimizer's parameters.
  ParameterState state_of(const torch::Tensor& param) const;
  void set_state(const torch::Tensor& param, ParameterState state);

 private:
  // The per-parameter buffers by the names checkpoints give them; const for a const optimizer.
  template <typename Self>
  static auto named_buffers(Self& self) {
    return std::array{std::pair{"momentum", &self.momentum_}, std::pair{"exp_avg", &self.exp_avg_},
                      std::pair{"exp_avg_sq", &self.exp_avg_sq_}};
  }
  size_t index_of(const torch::Tensor& param) const;
  void sgd_step(const std::vector<size_t>& active);
  void sgd_step_per_parameter(const std::vector<size_t>& active);
  void adamw_step(const std::vector<size_t>& active);

  OptimizerConfig config_;
  StepPath path_;
  double lr_;
  std::vector<torch::Tensor> params_;
  // Per parameter, undefined until its first step (as torch::optim's state).
  std::vector<torch::Tensor> momentum_;    // SGD
  std::vector<torch::Tensor> exp_avg_;     // AdamW
  std::vector<torch::Tensor> exp_avg_sq_;  // AdamW
  std::vector<int64_t> steps_;             // AdamW: steps this parameter took
};

// AdamW's constants, the same as torch::optim::AdamWOptions' defaults.
constexpr double kAdamBeta1 = 0.9;
constexpr double kAdamBeta2 = 0.999;
constexpr double kAdamEps = 1e-8;

}  // namespace flotilla::optim
