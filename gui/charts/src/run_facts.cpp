#include "flotilla/charts/run_facts.h"

#include <QDateTime>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/run_metrics.h"
#include "panel_common.h"

namespace flotilla::charts {
namespace {

using detail::label_number;

// The mean of a lead-rank field over the steps after warm-up.
double mean_after_warmup(const RankColumns& rank, const char* field) {
  const auto* column = rank.field(field);
  if (!column) return kMissing;
  if (rank.folded_rows > 0) {
    double weighted = 0, steps = 0;
    for (const auto& [value, weight] : detail::weighted_after_warmup(rank, *column, false))
      weighted += value * double(weight), steps += double(weight);
    return steps > 0 ? weighted / steps : kMissing;
  }
  double sum = 0;
  size_t n = 0;
  for (double v : metrics::after_warmup(*column))
    if (std::isfinite(v)) sum += v, ++n;
  return n ? sum / double(n) : kMissing;
}

std::string with_unit(double v, const char* unit, int significant = 4) {
  return std::isfinite(v) ? label_number(v, significant) + " " + unit : "—";
}

}  // namespace

std::string local_time_text(double seconds) {
  if (!std::isfinite(seconds)) return "—";
  return QDateTime::fromMSecsSinceEpoch(qint64(seconds * 1000))
      .toString("yyyy-MM-dd HH:mm:ss")
      .toStdString();
}

RunFacts facts_of(const RunData& run) {
  RunFacts facts;
  const auto& r = run.run;
  facts.title = r.id + " (" + r.experiment_name + "): " + std::string(controller::name_of(r.state));
  try {
    facts.config_yaml = to_yaml(parse_experiment(r.config_json, "the stored config"));
  } catch (const std::exception& e) {
    const auto json = nlohmann::json::parse(r.config_json, nullptr, false);
    facts.config_yaml = "# This Flotilla no longer reads the stored config as an experiment:\n# " +
                        std::string(e.what()).substr(0, 200) + "\n" +
                        (json.is_discarded() ? r.config_json : json.dump(2)) + "\n";
  }
  for (const auto& t : run.transitions)
    facts.transitions.push_back({std::string(controller::name_of(t.state)),
                                 local_time_text(double(t.at_ms) / 1000), t.reason});
  for (const auto& node : run.nodes) {
    RunFacts::Node row;
    row.node = node.name;
    row.host = node.host;
    std::string ranks;
    for (const auto& [rank, start] : run.starts)
      if (start.node == node.name) ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
    row.ranks = ranks.empty() ? "—" : ranks;
    std::string gpus;
    if (const auto s = run.systems.find(node.name); s != run.systems.end())
      for (const auto& [index, gpu] : s->second.gpus)
        gpus += (gpus.empty() ? "" : "; ") + std::to_string(index) + ": " + gpu.name + " " +
                with_unit(gpu.mem_total / detail::kGiB, "GiB", 3);
    if (gpus.empty())
      for (const auto& [name, bytes] : node.probe_gpus)
        gpus += (gpus.empty() ? "" : "; ") + name + " " + with_unit(bytes / detail::kGiB, "GiB", 3);
    row.gpus = gpus.empty() ? "none" : gpus;
    const auto last = run.last_time.find(node.name);
    row.last_record = last == run.last_time.end() ? "—" : local_time_text(last->second);
    const auto count = run.records_per_node.find(node.name);
    row.records = std::to_string(count == run.records_per_node.end() ? 0 : count->second);
    facts.nodes.push_back(row);
  }
  auto& s = facts.summary;
  s.emplace_back("strategy", run.shape.strategy + ", " + std::to_string(run.shape.world_size) +
                                 " rank(s) on " + join_list(r.nodes) + ", device " +
                                 run.shape.device);
  const auto lead_it = run.ranks.find(run.lead_rank());
  if (lead_it != run.ranks.end() && !run.coarse) {
    const RankColumns& lead = lead_it->second;
    s.emplace_back("steps (lead rank " + std::to_string(lead.rank) + ")",
                   label_number(lead.step.back(), 9));
    const auto throughput = detail::run_throughput(run);
    s.emplace_back("throughput (steady, after warm-up)",
                   throughput ? with_unit(*throughput, "samples/s") : "—");
    s.emplace_back("step time (mean after warm-up)",
                   with_unit(mean_after_warmup(lead, "step_ms"), "ms") + " = data " +
                       with_unit(mean_after_warmup(lead, "data_ms"), "ms") + " + forward " +
                       with_unit(mean_after_warmup(lead, "forward_ms"), "ms") + " + backward " +
                       with_unit(mean_after_warmup(lead, "backward_ms"), "ms") + " + comm " +
                       with_unit(mean_after_warmup(lead, "comm_ms"), "ms") + " + optimizer " +
                       with_unit(mean_after_warmup(lead, "optimizer_ms"), "ms"));
    s.emplace_back("bytes sent per step (mean)",
                   with_unit(mean_after_warmup(lead, "bytes_sent") / 1e6, "MB"));
    if (const auto* loss = lead.field("loss"))
      for (auto it = loss->rbegin(); it != loss->rend(); ++it)
        if (std::isfinite(*it)) {
          s.emplace_back("last loss", label_number(*it));
          break;
        }
  } else if (run.coarse) {
    s.emplace_back("steps", "loading…");
  } else {
    s.emplace_back("steps", "none yet");
  }
  if (!run.epochs.empty()) {
    const auto& e = run.epochs.back();
    s.emplace_back("epochs", std::to_string(run.epochs.size()));
    s.emplace_back("accuracy (last epoch)", "train " + with_unit(100 * e.acc_train, "%") +
                                                ", test " + with_unit(100 * e.acc_test, "%"));
  }
  double peak_rss = kMissing;
  // From each node's running peak: a folded row holds means, not the highest sample.
  for (const auto& [node, system] : run.systems)
    if (std::isfinite(system.rank_rss_peak) && !(peak_rss >= system.rank_rss_peak))
      peak_rss = system.rank_rss_peak;
  s.emplace_back("sampled rank RSS max", with_unit(peak_rss / (1024.0 * 1024.0), "MiB"));
  if (r.running_ms) {
    const double end = double(r.ended_ms.value_or(controller::now_ms()));
    s.emplace_back(r.ended_ms ? "ran for" : "running for",
                   with_unit((end - double(*r.running_ms)) / 1000, "s"));
  }
  for (const auto& [why, count] : run.skipped_records)
    facts.skipped.push_back(std::to_string(count) + " " + why + " (skipped)");
  for (const auto& [why, count] : run.skipped_fields)
    facts.skipped.push_back(std::to_string(count) + " x " + why + " (field left out)");
  return facts;
}

}  // namespace flotilla::charts
