#include "plan/memory_prediction.h"

#include <algorithm>

namespace flotilla::predict {

RankMemory predict_rank_memory(const RankMemoryInputs& in) {
  int64_t gradients = 0, held = 0;
  for (const auto& block : in.blocks) {
    if (!block.frozen) held += block.held;
    gradients += block.gradient;
  }
  // One micro-batch through the rank's blocks, forward then backward.
  int64_t fullest_pass = 0, held_before = 0, gradients_after = gradients;
  for (const auto& block : in.blocks) {
    gradients_after -= block.gradient;
    fullest_pass =
        std::max(fullest_pass,
                 held_before + (block.frozen ? block.forward_peak : gradients_after + block.peak));
    if (!block.frozen) held_before += block.held;
  }
  fullest_pass = std::max(fullest_pass, gradients + in.bucket_bytes);
  const int64_t others = std::max<int64_t>(in.live_micro_batches - 1, 0);
  int64_t evaluating = 0;
  for (const auto& block : in.blocks) evaluating = std::max(evaluating, block.evaluation_peak);
  RankMemory out;
  out.training_bytes = in.optimizer_state_bytes + others * (held + in.received_bytes) +
                       in.received_bytes + fullest_pass;
  out.evaluation_bytes = in.optimizer_state_bytes + gradients + evaluating;
  out.peak_bytes =
      std::max(in.loaded_peak_bytes, in.loaded_bytes + in.runtime_bytes +
                                         std::max(out.training_bytes, out.evaluation_bytes));
  return out;
}

}  // namespace flotilla::predict
