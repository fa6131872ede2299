#pragma once
// Progressive freezing of a model's leading blocks: a fixed schedule, or
// PipeTransformer's AutoFreeze idea: every `check_every` steps, the leading
// blocks whose gradient norm moved by less than `tolerance` since the last
// check freeze, never more than `alpha` of all blocks and never the last one.
// Plain arithmetic on norms every rank agrees on, so every rank decides alike.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

class Freezer {
 public:
  Freezer(FreezeConfig config, int64_t blocks);

  bool enabled() const { return config_.method != FreezeMethod::none; }
  int64_t frozen() const { return frozen_; }
  int64_t limit() const { return limit_; }

  // Fixed schedule: the frozen prefix for `step` (1-based) on; grows only.
  int64_t frozen_at(int64_t step);
  // AutoFreeze: whether gradient norms are to be observed after `step`.
  bool checks_after(int64_t step) const;
  // AutoFreeze: per-block gradient norms over every rank (negative: a block
  // without trainable parameters, which never holds the prefix back).
  // Returns the new frozen prefix.
  int64_t observe(const std::vector<double>& norms);

  // What a checkpoint keeps: the frozen prefix and AutoFreeze's last norms.
  struct State {
    int64_t frozen = 0;
    std::vector<double> previous;
  };
  State state() const { return {frozen_, previous_}; }
  void restore(State state) {
    frozen_ = state.frozen;
    previous_ = std::move(state.previous);
  }

 private:
  FreezeConfig config_;
  int64_t blocks_;
  int64_t limit_;
  int64_t frozen_ = 0;
  std::vector<double> previous_;
};

// Stops the gradients of those of `blocks` (block `first_block` of the whole
// model and on) that lie in the whole model's first `frozen`: they run no
// backward from then on, the optimizer skips them, and their gradients are gone.
void freeze_leading_blocks(torch::nn::Sequential& blocks, int64_t first_block, int64_t frozen);

}  // namespace flotilla
