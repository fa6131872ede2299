#pragma once
// The order in which one pipeline stage runs the forward and backward passes
// of a step's micro-batches. Plain data, so that it is tested on its own.

#include <cstdint>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

struct PipelineOp {
  enum class Kind { forward, backward };
  Kind kind;
  int64_t micro_batch;
  bool operator==(const PipelineOp& o) const {
    return kind == o.kind && micro_batch == o.micro_batch;
  }
};

// GPipe: every forward, then every backward in reverse (torchgpipe's order).
// 1F1B: stage s runs min(stages - s - 1, m) forwards ahead, then alternates
// one forward and one backward, then drains; at most stages - s micro-batches
// of activations are alive at once.
std::vector<PipelineOp> stage_schedule(Schedule schedule, int64_t stages, int64_t stage,
                                       int64_t micro_batches);

// Most micro-batches whose activations a schedule keeps alive at once.
int64_t peak_live_micro_batches(const std::vector<PipelineOp>& ops);

// The sizes of a batch's micro-batches: min(chunks, batch) of them, differing
// by at most one, larger first (torch.tensor_split's cut).
std::vector<int64_t> micro_batch_sizes(int64_t batch, int64_t chunks);

// GPipe's idle fraction of a step, (p - 1) / (m + p - 1).
double bubble_fraction(int64_t stages, int64_t micro_batches);

}  // namespace flotilla
