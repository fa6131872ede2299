#include "plan/step_prediction.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "pipeline/schedule.h"

namespace flotilla::predict {

double LinkModel::time_ms(double bytes) const {
  if (bytes <= 0) return 0;
  return latency_ms + (std::isfinite(bytes_per_ms) ? bytes / bytes_per_ms : 0.0);
}

double AllReduceModel::time_ms(double bytes, int64_t ranks) const {
  if (ranks <= 1 || bytes <= 0 || busbw_gbps_at_bytes.empty()) return 0;
  auto points = busbw_gbps_at_bytes;
  std::sort(points.begin(), points.end());
  double busbw = points.front().second;
  if (bytes >= points.back().first) {
    busbw = points.back().second;
  } else if (bytes > points.front().first) {
    const auto upper =
        std::find_if(points.begin(), points.end(), [&](const auto& p) { return p.first >= bytes; });
    const auto lower = upper - 1;
    const double t = (std::log(bytes) - std::log(lower->first)) /
                     (std::log(upper->first) - std::log(lower->first));
    busbw = lower->second + t * (upper->second - lower->second);
  }
  if (!(busbw > 0)) return 0;
  const double p = static_cast<double>(ranks);
  return 2 * (p - 1) / p * bytes / (busbw * 1e9) * 1e3;
}

StepPrediction predict_pipeline(const PipelineInputs& in) {
  const auto stages = static_cast<int64_t>(in.stages.size());
  const int64_t m = in.micro_batches;
  if (stages < 1 || m < 1) throw std::invalid_argument("predict_pipeline: no stage or micro-batch");
  if (static_cast<int64_t>(in.boundary_bytes.size()) != stages - 1)
    throw std::invalid_argument("predict_pipeline: " + std::to_string(stages - 1) +
                                " boundaries expected, got " +
                                std::to_string(in.boundary_bytes.size()));
  const auto crossing = [&](int64_t boundary) {
    const double codec = boundary < static_cast<int64_t>(in.boundary_codec_ms.size())
                             ? in.boundary_codec_ms[static_cast<size_t>(boundary)]
                             : 0.0;
    return in.link.time_ms(in.boundary_bytes[static_cast<size_t>(boundary)]) + codec;
  };
  constexpr double kNotYet = -1;
  std::vector<std::vector<double>> forward_done(
      static_cast<size_t>(stages), std::vector<double>(static_cast<size_t>(m), kNotYet));
  auto backward_done = forward_done;
  std::vector<std::vector<PipelineOp>> ops;
  for (int64_t s = 0; s < stages; ++s) ops.push_back(stage_schedule(in.schedule, stages, s, m));
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<double> free_at(static_cast<size_t>(stages), 0.0);
  // Each pass runs every operation whose input is there; a valid schedule
  // always has one, so the passes end.
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int64_t s = 0; s < stages; ++s) {
      const auto& cost = in.stages[static_cast<size_t>(s)];
      auto& at = next[static_cast<size_t>(s)];
      while (at < ops[static_cast<size_t>(s)].size()) {
        const auto& op = ops[static_cast<size_t>(s)][at];
        const auto mb = static_cast<size_t>(op.micro_batch);
        double ready = 0;
        if (op.kind == PipelineOp::Kind::forward) {
          if (s > 0) {
            const double before = forward_done[static_cast<size_t>(s - 1)][mb];
            if (before == kNotYet) break;
            ready = before + crossing(s - 1);
          }
        } else if (s + 1 < stages) {
          const double after = backward_done[static_cast<size_t>(s + 1)][mb];
          if (after == kNotYet) break;
          ready = after + crossing(s);
        }
        const bool forward = op.kind == PipelineOp::Kind::forward;
        const double start = std::max(free_at[static_cast<size_t>(s)], ready);
        const double end = start + (forward ? cost.forward_ms : cost.backward_ms);
        (forward ? forward_done : backward_done)[static_cast<size_t>(s)][mb] = end;
        free_at[static_cast<size_t>(s)] = end;
        ++at;
        progressed = true;
      }
    }
  }
  StepPrediction out;
  double busy_sum = 0;
  for (int64_t s = 0; s < stages; ++s) {
    if (next[static_cast<size_t>(s)] != ops[static_cast<size_t>(s)].size())
      throw std::logic_error("predict_pipeline: the schedule cannot finish");
    const auto& cost = in.stages[static_cast<size_t>(s)];
    const double ends = free_at[static_cast<size_t>(s)] +
                        in.allreduce.time_ms(cost.allreduce_bytes, in.replicas) + cost.optimizer_ms;
    const double compute =
        static_cast<double>(m) * (cost.forward_ms + cost.backward_ms) + cost.optimizer_ms;
    busy_sum += compute;
    out.step_ms = std::max(out.step_ms, ends);
    out.compute_ms = std::max(out.compute_ms, compute);
  }
  // What the busiest stage waits: bubble and transfers the schedule exposes.
  out.exposed_comm_ms = std::max(0.0, out.step_ms - out.compute_ms);
  out.bubble_fraction =
      out.step_ms > 0 ? 1 - busy_sum / (static_cast<double>(stages) * out.step_ms) : 0;
  return out;
}

StepPrediction predict_ddp(const DdpInputs& in) {
  const auto blocks = in.block_forward_ms.size();
  if (in.block_backward_ms.size() != blocks)
    throw std::invalid_argument("predict_ddp: forward and backward times of different blocks");
  double forward = 0;
  for (double f : in.block_forward_ms) forward += f;
  // When each block's gradients are ready, from the backward's start.
  std::vector<double> ready(blocks, 0.0);
  double clock = 0;
  for (size_t b = blocks; b-- > 0;) {
    clock += in.block_backward_ms[b];
    ready[b] = clock;
  }
  const double backward = clock;
  double comm_free = 0;
  for (const auto& [closing_block, bytes] : in.buckets) {
    const auto b = static_cast<size_t>(
        std::clamp<int64_t>(closing_block, 0, static_cast<int64_t>(blocks) - 1));
    const double start = std::max(comm_free, blocks > 0 ? ready[b] : 0.0);
    comm_free = start + in.allreduce.time_ms(bytes, in.ranks);
  }
  StepPrediction out;
  out.compute_ms = forward + backward + in.optimizer_ms;
  out.step_ms = forward + std::max(backward, comm_free) + in.optimizer_ms;
  out.exposed_comm_ms = out.step_ms - out.compute_ms;
  return out;
}

}  // namespace flotilla::predict
