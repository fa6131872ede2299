#include "flotilla/protocol/run_statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "flotilla/protocol/record_reading.h"
#include "flotilla/protocol/run_metrics.h"

namespace flotilla::metrics {
namespace {

using records::Step;

template <typename F>
std::vector<double> series(const std::vector<const Step*>& steps, F value) {
  std::vector<double> out;
  out.reserve(steps.size());
  for (const auto* s : steps) out.push_back(value(*s));
  return out;
}

std::vector<const Step*> after_warmup(const std::vector<const Step*>& steps) {
  const auto skip = warmup_steps(static_cast<int64_t>(steps.size()));
  return {steps.begin() + skip, steps.end()};
}

// Each rank's steps, in step order.
std::map<int64_t, std::vector<const Step*>> steps_by_rank(const std::vector<Step>& steps) {
  std::map<int64_t, std::vector<const Step*>> by_rank;
  for (const auto& s : steps) by_rank[s.rank].push_back(&s);
  for (auto& [rank, list] : by_rank)
    std::stable_sort(list.begin(), list.end(),
                     [](const Step* a, const Step* b) { return a->step < b->step; });
  return by_rank;
}

std::optional<StepShares> step_shares(const std::vector<const Step*>& measured) {
  double total = 0;
  StepShares sum;
  for (const auto* s : measured) {
    total += s->step_ms;
    sum.data += s->data_ms;
    sum.forward += s->forward_ms;
    sum.backward += s->backward_ms;
    sum.comm += s->comm_ms;
    sum.optimizer += s->optimizer_ms;
  }
  if (total <= 0) return std::nullopt;
  return StepShares{sum.data / total, sum.forward / total, sum.backward / total, sum.comm / total,
                    sum.optimizer / total};
}

// Communication operations of one step: the record's rate times its time.
double operations_of(const Step& s) {
  return std::round(s.comm_per_s * s.step_ms / 1000.0);
}

// Replica 0's stages, step by step: Σ busy / (stages x the slowest stage's step).
std::optional<double> pipeline_efficiency(const std::vector<Step>& steps, int64_t& stages) {
  std::map<int64_t, std::vector<const Step*>> by_step;
  int64_t last_stage = -1;
  for (const auto& s : steps) {
    if (s.stage < 0 || s.replica != 0) continue;
    by_step[s.step].push_back(&s);
    last_stage = std::max(last_stage, s.stage);
  }
  stages = last_stage + 1;
  if (stages <= 0) return std::nullopt;
  std::vector<double> per_step;
  for (const auto& [step, ranks] : by_step) {
    if (static_cast<int64_t>(ranks.size()) != stages) continue;  // a stage's record is missing
    double busy = 0, slowest = 0;
    for (const auto* s : ranks) {
      busy += s->busy_ms;
      slowest = std::max(slowest, s->step_ms);
    }
    if (slowest > 0) per_step.push_back(busy / (static_cast<double>(stages) * slowest));
  }
  return median(metrics::after_warmup(per_step));
}

}  // namespace

std::string_view name_of(MemorySource source) {
  switch (source) {
    case MemorySource::gpu_peak:
      return "gpu mem_peak";
    case MemorySource::rank_rss:
      return "rank RSS";
    case MemorySource::step_rss:
      return "step mem_peak (RSS)";
    case MemorySource::none:
      break;
  }
  return "none";
}

RunStatistics run_statistics(const RunRecords& in) {
  RunStatistics out;
  const auto by_rank = steps_by_rank(in.steps);

  std::vector<const Step*> lead;
  for (const auto& [rank, list] : by_rank)
    for (const auto* s : list)
      if (records::is_lead(*s)) lead.push_back(s);
  std::stable_sort(lead.begin(), lead.end(),
                   [](const Step* a, const Step* b) { return a->step < b->step; });
  out.steps = static_cast<int64_t>(lead.size());
  if (!lead.empty()) {
    const auto measured = after_warmup(lead);
    std::vector<StepWork> work;
    for (const auto* s : lead) work.push_back({static_cast<double>(s->samples), s->samples_per_s});
    out.throughput = throughput(work);
    out.step_ms = median(series(measured, [](const Step& s) { return s.step_ms; }));
    out.step_shares = step_shares(measured);

    std::vector<double> busbw, message;
    double comm = 0, comm_busy = 0;
    for (const auto* s : measured) {
      if (s->busbw_gbps > 0) busbw.push_back(s->busbw_gbps);
      if (const double ops = operations_of(*s); ops >= 1 && s->bytes_sent > 0)
        message.push_back(static_cast<double>(s->bytes_sent) / ops);
      comm += s->comm_ms;
      comm_busy += s->comm_busy_ms;
    }
    out.busbw_gbps = median(busbw);
    out.message_bytes = median(message);
    if (comm_busy > 0) out.comm_hidden = std::clamp(1.0 - comm / comm_busy, 0.0, 1.0);

    double received = 0, receiving_ms = 0;
    int64_t receiving_steps = 0;
    for (const auto& [rank, list] : by_rank)
      for (const auto* s : after_warmup(list)) {
        if (s->recv_act_bytes + s->recv_grad_bytes <= 0) continue;
        received += static_cast<double>(s->recv_act_bytes + s->recv_grad_bytes);
        receiving_ms += s->recv_act_ms + s->recv_grad_ms;
        ++receiving_steps;
      }
    if (receiving_ms > 0) {
      out.recv_gbps = received / 1e9 / (receiving_ms / 1000.0);
      out.recv_ms = receiving_ms / static_cast<double>(receiving_steps);
    }

    std::vector<double> rank_bytes;
    for (const auto& [rank, list] : by_rank)
      if (auto m = median(series(after_warmup(list),
                                 [](const Step& s) { return static_cast<double>(s.bytes_sent); })))
        rank_bytes.push_back(*m);
    if (!rank_bytes.empty())
      out.bytes_per_step = std::accumulate(rank_bytes.begin(), rank_bytes.end(), 0.0) /
                           static_cast<double>(rank_bytes.size());
  }

  int64_t step_peak = 0;
  for (const auto& s : in.steps) step_peak = std::max(step_peak, s.mem_peak);
  int64_t rss_peak = 0;
  for (const auto& [rank, rss] : in.peak_rank_rss) rss_peak = std::max(rss_peak, rss);
  if (in.gpu && step_peak > 0) {
    out.peak_memory = step_peak;
    out.memory_source = MemorySource::gpu_peak;
  } else if (!in.gpu && (rss_peak > 0 || step_peak > 0)) {
    // A peak is the larger of the two looks at the rank's resident memory:
    // its own high-water mark (ru_maxrss) in each step, and the agents'
    // samples each second, which can miss a run's peak or, for a run of
    // less than a second, see only the process just started.
    out.peak_memory = std::max(rss_peak, step_peak);
    out.memory_source = rss_peak > step_peak ? MemorySource::rank_rss : MemorySource::step_rss;
  }

  std::vector<const records::Epoch*> epochs;
  for (const auto& e : in.epochs)
    if (e.rank == 0) epochs.push_back(&e);
  std::stable_sort(epochs.begin(), epochs.end(),
                   [](const auto* a, const auto* b) { return a->epoch < b->epoch; });
  out.epochs = static_cast<int64_t>(epochs.size());
  if (!epochs.empty()) {
    std::vector<double> times;
    for (size_t i = epochs.size() > 1 ? 1 : 0; i < epochs.size(); ++i)
      times.push_back(epochs[i]->epoch_s);
    out.epoch_s = median(times);
    out.acc_test = epochs.back()->acc_test;
    // One epoch's work: the lead rank's samples in the last epoch it has a
    // record of (an epoch record is written once the epoch's steps are done).
    const int64_t last = epochs.back()->epoch;
    double samples = 0;
    for (const auto* s : lead)
      if (s->epoch == last) samples += static_cast<double>(s->samples);
    if (samples > 0) out.epoch_samples = samples;
    if (out.epoch_samples && out.throughput && *out.throughput > 0)
      out.steady_epoch_s = *out.epoch_samples / *out.throughput;
  }

  for (const auto& e : in.ends) {
    out.run_s = std::max(out.run_s.value_or(0.0), e.elapsed_s);
    if (e.outcome == records::Outcome::oom)
      out.oom_batch_size = std::max(out.oom_batch_size.value_or(0), e.batch_size);
  }

  out.pipeline_efficiency = pipeline_efficiency(in.steps, out.pipeline_stages);
  return out;
}

std::optional<double> speedup(std::optional<double> throughput,
                              std::optional<double> baseline_throughput) {
  if (!throughput || !baseline_throughput || *baseline_throughput <= 0) return std::nullopt;
  return *throughput / *baseline_throughput;
}

std::optional<double> scaling_efficiency(std::optional<double> speedup, int64_t ranks,
                                         int64_t baseline_ranks) {
  if (!speedup || ranks <= 0 || baseline_ranks <= 0) return std::nullopt;
  return *speedup / (static_cast<double>(ranks) / static_cast<double>(baseline_ranks));
}

std::optional<double> gpipe_bound(int64_t chunks, int64_t stages) {
  if (chunks <= 0 || stages <= 0) return std::nullopt;
  return static_cast<double>(chunks) / static_cast<double>(chunks + stages - 1);
}

std::optional<TimeSplit> time_split(std::optional<double> epoch_s, int64_t ranks,
                                    std::optional<double> baseline_epoch_s,
                                    int64_t baseline_ranks) {
  if (!epoch_s || !baseline_epoch_s || ranks <= 0 || baseline_ranks <= 0) return std::nullopt;
  TimeSplit split;
  split.compute_s =
      *baseline_epoch_s * static_cast<double>(baseline_ranks) / static_cast<double>(ranks);
  split.comm_s = std::max(0.0, *epoch_s - split.compute_s);
  return split;
}

double ring_allreduce_bytes(double payload, int64_t ranks) {
  if (ranks <= 1) return 0;
  const double p = static_cast<double>(ranks);
  return 2.0 * payload * (p - 1.0) / p;
}

std::optional<double> ring_bandwidth_gbps(std::optional<double> payload_per_step, int64_t ranks,
                                          int64_t steps_per_epoch, std::optional<double> comm_s) {
  if (!payload_per_step || !comm_s || *comm_s <= 0 || ranks <= 1 || steps_per_epoch <= 0)
    return std::nullopt;
  return ring_allreduce_bytes(*payload_per_step, ranks) * static_cast<double>(steps_per_epoch) /
         *comm_s / 1e9;
}

std::optional<MeanSpread> mean_and_spread(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  MeanSpread out;
  out.count = static_cast<int64_t>(values.size());
  out.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(out.count);
  if (out.count > 1) {
    double squares = 0;
    for (double v : values) squares += (v - out.mean) * (v - out.mean);
    out.spread = std::sqrt(squares / static_cast<double>(out.count - 1));
  }
  return out;
}

std::optional<double> link_busbw_at(std::vector<LinkPoint> sweep, double bytes) {
  sweep.erase(
      std::remove_if(sweep.begin(), sweep.end(), [](const LinkPoint& p) { return !(p.bytes > 0); }),
      sweep.end());
  if (sweep.empty() || !(bytes > 0)) return std::nullopt;
  std::sort(sweep.begin(), sweep.end(),
            [](const LinkPoint& a, const LinkPoint& b) { return a.bytes < b.bytes; });
  if (bytes <= sweep.front().bytes) return sweep.front().busbw_gbps;
  if (bytes >= sweep.back().bytes) return sweep.back().busbw_gbps;
  const auto upper = std::find_if(sweep.begin(), sweep.end(),
                                  [&](const LinkPoint& p) { return p.bytes >= bytes; });
  const auto lower = upper - 1;
  const double t = (std::log2(bytes) - std::log2(lower->bytes)) /
                   (std::log2(upper->bytes) - std::log2(lower->bytes));
  return lower->busbw_gbps + t * (upper->busbw_gbps - lower->busbw_gbps);
}

std::optional<double> link_utilisation(std::optional<double> run_busbw_gbps,
                                       std::optional<double> link_busbw_gbps) {
  if (!run_busbw_gbps || !link_busbw_gbps || *link_busbw_gbps <= 0) return std::nullopt;
  return *run_busbw_gbps / *link_busbw_gbps;
}

}  // namespace flotilla::metrics
