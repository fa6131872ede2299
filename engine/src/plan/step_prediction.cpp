#include "plan/step_prediction.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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

double sharing_slowdown(const std::vector<double>& measured, int64_t at_once) {
  if (at_once <= 1 || measured.empty()) return 1.0;
  const auto n = static_cast<size_t>(at_once);
  if (n <= measured.size()) return std::max(1.0, measured[n - 1]);
  return std::max(1.0,
                  measured.back() * static_cast<double>(n) / static_cast<double>(measured.size()));
}

StepPrediction predict_pipeline(const PipelineInputs& in) {
  const auto stages = static_cast<int64_t>(in.stages.size());
  const int64_t m = in.micro_batches;
  if (stages < 1 || m < 1) throw std::invalid_argument("predict_pipeline: no stage or micro-batch");
  if (static_cast<int64_t>(in.boundary_bytes.size()) != stages - 1)
    throw std::invalid_argument("predict_pipeline: " + std::to_string(stages - 1) +
                                " boundaries expected, got " +
                                std::to_string(in.boundary_bytes.size()));
  const bool shared = !in.core_sharing.empty();
  if (shared && (static_cast<int64_t>(in.stage_machine.size()) != stages ||
                 static_cast<int64_t>(in.stage_ranks.size()) != stages))
    throw std::invalid_argument("predict_pipeline: a machine and a rank count per stage expected");
  const auto crossing = [&](int64_t boundary) {
    const double codec = boundary < static_cast<int64_t>(in.boundary_codec_ms.size())
                             ? in.boundary_codec_ms[static_cast<size_t>(boundary)]
                             : 0.0;
    const auto b = static_cast<size_t>(boundary);
    const auto& link = b < in.boundary_links.size() ? in.boundary_links[b] : in.link;
    return link.time_ms(in.boundary_bytes[b]) + codec;
  };
  const auto S = static_cast<size_t>(stages);
  constexpr double kNotYet = -1;
  std::vector<std::vector<double>> forward_done(
      S, std::vector<double>(static_cast<size_t>(m), kNotYet));
  auto backward_done = forward_done;
  std::vector<std::vector<PipelineOp>> ops;
  for (int64_t s = 0; s < stages; ++s) ops.push_back(stage_schedule(in.schedule, stages, s, m));
  std::vector<size_t> next(S, 0);
  std::vector<double> free_at(S, 0.0);
  std::vector<bool> busy(S, false);
  std::vector<double> remaining(S, 0.0);  // of the running operation, in time alone

  // When stage s's next operation can start (its input has arrived), or
  // kNotYet while the stage it waits on has not produced it. A stage posts
  // its receive when it is free for the operation that needs it, and a
  // Gloo send moves no data before its receive is posted: a transfer starts
  // once the sender has sent and the receiver is free, and the receiver's
  // earlier work does not hide it.
  const auto ready_at = [&](size_t s) {
    const auto& op = ops[s][next[s]];
    const auto mb = static_cast<size_t>(op.micro_batch);
    if (op.kind == PipelineOp::Kind::forward) {
      if (s == 0) return 0.0;
      const double before = forward_done[s - 1][mb];
      return before == kNotYet
                 ? kNotYet
                 : std::max(before, free_at[s]) + crossing(static_cast<int64_t>(s) - 1);
    }
    if (s + 1 == S) return 0.0;
    const double after = backward_done[s + 1][mb];
    return after == kNotYet ? kNotYet
                            : std::max(after, free_at[s]) + crossing(static_cast<int64_t>(s));
  };
  // Events in time order: an operation starts once its input is there and
  // its stage is free; running ones advance at their machine's shared rate;
  // the next event is the first arrival or completion.
  constexpr double kEpsilon = 1e-9;
  double now = 0;
  for (;;) {
    bool all_done = true;
    double next_event = std::numeric_limits<double>::infinity();
    for (size_t s = 0; s < S; ++s) {
      if (busy[s] || next[s] == ops[s].size()) continue;
      const double ready = ready_at(s);
      if (ready == kNotYet) continue;
      if (ready <= now + kEpsilon) {
        const auto& cost = in.stages[s];
        remaining[s] =
            ops[s][next[s]].kind == PipelineOp::Kind::forward ? cost.forward_ms : cost.backward_ms;
        busy[s] = true;
      } else {
        next_event = std::min(next_event, ready);
      }
    }
    std::vector<double> rate(S, 1.0);
    if (shared) {
      std::map<int64_t, int64_t> computing;  // ranks computing, by machine
      for (size_t s = 0; s < S; ++s)
        if (busy[s]) computing[in.stage_machine[s]] += in.stage_ranks[s];
      for (size_t s = 0; s < S; ++s)
        rate[s] = 1.0 / sharing_slowdown(in.core_sharing, computing[in.stage_machine[s]]);
    }
    for (size_t s = 0; s < S; ++s) {
      if (busy[s]) next_event = std::min(next_event, now + remaining[s] / rate[s]);
      if (busy[s] || next[s] < ops[s].size()) all_done = false;
    }
    if (all_done) break;
    if (!std::isfinite(next_event))
      throw std::logic_error("predict_pipeline: the schedule cannot finish");
    for (size_t s = 0; s < S; ++s) {
      if (!busy[s]) continue;
      remaining[s] -= (next_event - now) * rate[s];
      if (remaining[s] > kEpsilon * std::max(1.0, next_event)) continue;
      const auto& op = ops[s][next[s]];
      (op.kind == PipelineOp::Kind::forward
           ? forward_done
           : backward_done)[s][static_cast<size_t>(op.micro_batch)] = next_event;
      free_at[s] = next_event;
      busy[s] = false;
      ++next[s];
    }
    now = next_event;
  }
  StepPrediction out;
  double busy_sum = 0;
  for (size_t s = 0; s < S; ++s) {
    const auto& cost = in.stages[s];
    const double ends =
        free_at[s] + in.allreduce.time_ms(cost.allreduce_bytes, in.replicas) + cost.optimizer_ms;
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
  const double slowdown = std::max(1.0, in.slowdown);
  double forward = 0;
  for (double f : in.block_forward_ms) forward += f * slowdown;
  // When each block's gradients are ready, from the backward's start.
  std::vector<double> ready(blocks, 0.0);
  double clock = 0;
  for (size_t b = blocks; b-- > 0;) {
    clock += in.block_backward_ms[b] * slowdown;
    ready[b] = in.comm_beside_backward ? clock : 0.0;
  }
  const double backward = clock;
  // Beside the backward each bucket starts once its gradients are ready;
  // after it (cores all taken), one after the other from its end.
  double comm_free = in.comm_beside_backward ? 0.0 : backward;
  for (const auto& [closing_block, bytes] : in.buckets) {
    const auto b = static_cast<size_t>(
        std::clamp<int64_t>(closing_block, 0, static_cast<int64_t>(blocks) - 1));
    const double start = std::max(comm_free, blocks > 0 ? ready[b] : 0.0);
    comm_free = start + in.allreduce.time_ms(bytes, in.ranks);
  }
  StepPrediction out;
  const double optimizer = in.optimizer_ms * slowdown;
  out.compute_ms = forward + backward + optimizer;
  out.step_ms = forward + std::max(backward, comm_free) + optimizer;
  out.exposed_comm_ms = out.step_ms - out.compute_ms;
  return out;
}

}  // namespace flotilla::predict
