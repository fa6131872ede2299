#include "pipeline/schedule.h"

#include <algorithm>

namespace flotilla {

std::vector<PipelineOp> stage_schedule(Schedule schedule, int64_t stages, int64_t stage,
                                       int64_t micro_batches) {
  using Kind = PipelineOp::Kind;
  std::vector<PipelineOp> ops;
  ops.reserve(static_cast<size_t>(2 * micro_batches));
  if (schedule == Schedule::gpipe) {
    for (int64_t i = 0; i < micro_batches; ++i) ops.push_back({Kind::forward, i});
    for (int64_t i = micro_batches; i-- > 0;) ops.push_back({Kind::backward, i});
    return ops;
  }
  const int64_t warmup = std::min(stages - stage - 1, micro_batches);
  int64_t next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) ops.push_back({Kind::forward, next_forward});
  while (next_forward < micro_batches) {
    ops.push_back({Kind::forward, next_forward++});
    ops.push_back({Kind::backward, next_backward++});
  }
  while (next_backward < micro_batches) ops.push_back({Kind::backward, next_backward++});
  return ops;
}

int64_t peak_live_micro_batches(const std::vector<PipelineOp>& ops) {
  int64_t live = 0, peak = 0;
  for (const auto& op : ops) {
    live += op.kind == PipelineOp::Kind::forward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

std::vector<int64_t> micro_batch_sizes(int64_t batch, int64_t chunks) {
  const int64_t count = std::max<int64_t>(1, std::min(chunks, batch));
  std::vector<int64_t> sizes(count);
  for (int64_t i = 0; i < count; ++i) sizes[i] = batch / count + (i < batch % count ? 1 : 0);
  return sizes;
}

double bubble_fraction(int64_t stages, int64_t micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

}  // namespace flotilla
