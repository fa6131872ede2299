// The panels of the training itself: throughput, where a step's time goes,
// loss and accuracy.
#include <cmath>
#include <map>
#include <tuple>

#include "flotilla/charts/transforms.h"
#include "panel_common.h"

namespace flotilla::charts::detail {
namespace {

// Up to this many compared runs, each median's label sits beside its line.
constexpr size_t kLabelledRuns = 1;

// The ranks that speak for their data-parallel replica: the loss-computing
// last stage of each pipeline, or every rank outside pipelines.
std::vector<const RankColumns*> replica_ranks(const RunData& run) {
  std::map<int64_t, const RankColumns*> by_replica;
  std::vector<const RankColumns*> plain;
  for (const auto& [r, rank] : run.ranks) {
    if (!rank.stage) {
      plain.push_back(&rank);
      continue;
    }
    auto& best = by_replica[rank.replica];
    if (!best || *rank.stage > *best->stage) best = &rank;
  }
  if (!by_replica.empty()) {
    std::vector<const RankColumns*> out;
    for (const auto& [replica, rank] : by_replica) out.push_back(rank);
    return out;
  }
  return plain;
}

// The job's samples/s per step: the sum over data-parallel replicas of each
// replica's own rate (samples_per_s / replicas), at the steps every replica
// has reported, placed at the lead rank's x.
void add_job_line(PanelDescription& panel, const RunData& run, const LineSpec& spec,
                  const PanelOptions& options) {
  const auto reps = replica_ranks(run);
  const auto lead_it = run.ranks.find(run.lead_rank());
  if (reps.empty() || lead_it == run.ranks.end()) return;
  const RankColumns& lead = lead_it->second;
  const double replicas = double(std::max<int64_t>(run.shape.replicas, 1));
  // A row of buckets (the store's, or older steps folded) meets the other
  // ranks' rows of the same bucket; the buckets are the same steps for every rank.
  auto key_of = [&](const RankColumns& rank, size_t row) {
    const double step = rank.step[row];
    if (run.coarse && run.bucket_steps > 0)
      return std::pair{true, std::floor(step / double(run.bucket_steps))};
    if (row < rank.folded_rows) return std::pair{true, std::floor(step / double(run.step_bucket))};
    return std::pair{false, step};
  };
  // step (or bucket) -> (sum, replicas reporting)
  std::map<std::pair<bool, double>, std::pair<double, size_t>> sums;
  for (const auto* rank : reps) {
    const auto* rate = rank->field("samples_per_s");
    if (!rate) return;
    for (size_t i = 0; i < rank->rows(); ++i) {
      if (!std::isfinite((*rate)[i])) continue;
      auto& [sum, count] = sums[key_of(*rank, i)];
      sum += (*rate)[i] / replicas;
      ++count;
    }
  }
  const XFrame lead_frame = rank_frame(run, lead, options.x);
  XFrame frame;
  auto y = std::make_shared<std::vector<double>>();
  for (size_t k = 0; k < lead_frame.rows.size(); ++k) {
    const auto it = sums.find(key_of(lead, lead_frame.rows[k]));
    if (it == sums.end() || it->second.second < reps.size()) continue;
    frame.x->push_back((*lead_frame.x)[k]);
    frame.rows.push_back(lead_frame.rows[k]);
    y->push_back(it->second.first);
  }
  add_line(panel, spec, frame, y, options);
}

}  // namespace

PanelDescription throughput_panel(const std::vector<const RunData*>& runs, const PanelOptions& o) {
  PanelDescription panel;
  panel.title = "Throughput";
  panel.y_axes = {{"samples/s"}};
  const bool several = runs.size() > 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& run = *runs[i];
    if (auto why = missing_times_reason(run, o.x)) {
      panel.empty_reason = *why;
      return panel;
    }
    const double replicas = double(std::max<int64_t>(run.shape.replicas, 1));
    const std::string prefix = several ? run_label(run) + " " : "";
    if (!several) {
      for (const auto& [r, rank] : run.ranks) {
        if (!rank_shown(rank, o)) continue;
        add_rank_field(panel, run, rank, "samples_per_s",
                       {rank_label(rank), run.run.id, "samples/s", "samples_per_s / replicas",
                        SeriesStyle::thin, int(r)},
                       o, [replicas](double v) { return v / replicas; });
      }
    }
    add_job_line(
        panel, run,
        {prefix + "job", run.run.id, "samples/s", "sum over replicas of samples_per_s / replicas",
         SeriesStyle::bold, several ? int(i) : kJobColour},
        o);
    // Beside their lines, the labels of compared runs cover the plot (four
    // two-line labels took its upper half, over the data, in the Compare tab):
    // a comparison's legend entries carry the figures instead.
    if (const auto steady = run_throughput(run)) {
      if (runs.size() <= kLabelledRuns)
        panel.references.push_back(
            {prefix + "steady after warm-up " + label_number(*steady) + " samples/s",
             prefix + "steady", *steady, 0, several ? int(i) : kJobColour});
      else
        panel.references.push_back(
            {"", prefix + "steady " + label_number(*steady), *steady, 0, int(i)});
    }
  }
  if (panel.series.empty() && runs.size() == 1) panel.empty_reason = no_steps_reason(*runs[0]);
  return panel;
}

PanelDescription step_time_panel(const std::vector<const RunData*>& runs, const PanelOptions& o) {
  PanelDescription panel;
  panel.y_axes = {{"time per step (ms)"}};
  if (runs.size() > 1) {
    panel.title = "Step time (lead rank)";
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunData& run = *runs[i];
      if (auto why = missing_times_reason(run, o.x)) {
        panel.empty_reason = *why;
        return panel;
      }
      const auto lead = run.ranks.find(run.lead_rank());
      if (lead == run.ranks.end()) continue;
      add_rank_field(
          panel, run, lead->second, "step_ms",
          {run_label(run) + " step", run.run.id, "ms", "step_ms", SeriesStyle::bold, int(i)}, o);
      add_rank_field(panel, run, lead->second, "comm_ms",
                     {run_label(run) + " comm", run.run.id, "ms", "comm_ms (exposed communication)",
                      SeriesStyle::dashed, int(i)},
                     o);
    }
    return panel;
  }
  const RunData& run = *runs[0];
  if (auto why = missing_times_reason(run, o.x)) {
    panel.empty_reason = *why;
    return panel;
  }
  const int64_t chosen = o.breakdown_rank.value_or(run.lead_rank());
  const auto it = run.ranks.find(chosen);
  if (it == run.ranks.end()) {
    panel.title = "Step time";
    panel.empty_reason = run.ranks.empty() ? no_steps_reason(run)
                                           : "rank " + std::to_string(chosen) + " has no steps";
    return panel;
  }
  const RankColumns& rank = it->second;
  panel.title = "Step time: " + rank_label(rank) + "'s breakdown";
  // The phases of a step, timed back to back: stacked, they add up to the step.
  const std::pair<const char*, const char*> phases[] = {{"data_ms", "data"},
                                                        {"forward_ms", "forward"},
                                                        {"backward_ms", "backward"},
                                                        {"comm_ms", "exposed comm"},
                                                        {"optimizer_ms", "optimizer"}};
  const XFrame frame = rank_frame(run, rank, o.x);
  int colour = 0;
  for (const auto& [field, name] : phases) {
    const auto* column = rank.field(field);
    if (!column) continue;
    Series s;
    s.name = name;
    s.run = run.run.id;
    s.unit = "ms";
    s.formula = field;
    s.style = SeriesStyle::stacked_area;
    s.colour = colour++;
    s.x = frame.x;
    auto y = take(*column, frame);
    s.y = o.smoothing > 0 ? std::make_shared<std::vector<double>>(smooth_ema(*y, o.smoothing))
                          : std::shared_ptr<std::vector<double>>(y);
    if (!frame.empty()) panel.series.push_back(std::move(s));
  }
  add_rank_field(panel, run, rank, "step_ms",
                 {"whole step", run.run.id, "ms", "step_ms", SeriesStyle::thin, kJobColour}, o);
  // Pipelines: each stage's busy and idle share of its step, against the
  // GPipe bubble (p - 1) / (m + p - 1) of this many stages and micro-batches.
  bool pipeline = false;
  for (const auto& [r, other] : run.ranks) {
    if (!other.stage || !rank_shown(other, o) || !other.has("idle_ms")) continue;
    if (!pipeline) {
      panel.y_axes.push_back({"share of the step (%)", true});
      pipeline = true;
    }
    const auto* step_ms = other.field("step_ms");
    if (!step_ms) continue;
    for (const auto& [field, what, style] : {std::tuple{"busy_ms", "busy", SeriesStyle::dotted},
                                             std::tuple{"idle_ms", "idle", SeriesStyle::dashed}}) {
      const auto* column = other.field(field);
      if (!column) continue;
      const XFrame f = rank_frame(run, other, o.x);
      add_line(panel,
               {"stage " + std::to_string(*other.stage) +
                    (other.replica > 0 ? " replica " + std::to_string(other.replica) : "") + " " +
                    what + " %",
                run.run.id, "%", std::string(field) + " / step_ms x 100", style, 5 + int(r), 1},
               f, take_rows(f, [&](size_t row) { return 100 * (*column)[row] / (*step_ms)[row]; }),
               o);
    }
  }
  if (pipeline) {
    const double p = double(run.shape.stages), m = double(run.shape.chunks);
    const double bubble = 100 * (p - 1) / (m + p - 1);
    // The legend beside the plot cuts a long name: the line says the figure,
    // the note under the panel how it is made.
    panel.references.push_back({"GPipe bubble " + label_number(bubble, 3) + " %", "GPipe bubble",
                                bubble, 1, kLimitColour});
    panel.notes.push_back(
        "GPipe bubble = (p-1)/(m+p-1) with p = " + std::to_string(run.shape.stages) +
        " stages and m = " + std::to_string(run.shape.chunks) + " micro-batches");
    panel.title += "; busy and idle per stage";
  }
  if (panel.series.empty()) panel.empty_reason = no_steps_reason(run);
  return panel;
}

PanelDescription loss_panel(const std::vector<const RunData*>& runs, const PanelOptions& o) {
  PanelDescription panel;
  panel.title = "Loss and accuracy";
  panel.y_axes = {{"loss"}, {"accuracy (%)", true}};
  const bool several = runs.size() > 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& run = *runs[i];
    if (auto why = missing_times_reason(run, o.x)) {
      panel.empty_reason = *why;
      return panel;
    }
    const std::string prefix = several ? run_label(run) + " " : "";
    const auto lead = run.ranks.find(run.lead_rank());
    if (lead != run.ranks.end())
      add_rank_field(panel, run, lead->second, "loss",
                     {prefix + "loss (" + rank_label(lead->second) + ")", run.run.id, "", "loss",
                      several ? SeriesStyle::bold : SeriesStyle::thin, several ? int(i) : 0},
                     o);
    const XFrame epochs = epoch_frame(run, o.x);
    const std::pair<double EpochPoint::*, const char*> accuracies[] = {
        {&EpochPoint::acc_train, "train accuracy"}, {&EpochPoint::acc_test, "test accuracy"}};
    int colour = several ? int(i) : 1;
    for (const auto& [member, name] : accuracies) {
      if (several && member == &EpochPoint::acc_train) continue;  // test accuracy compares runs
      add_line(panel,
               {prefix + name + " (per epoch)", run.run.id, "%",
                std::string(member == &EpochPoint::acc_train ? "acc_train" : "acc_test") +
                    " x 100 of each epoch record",
                SeriesStyle::markers, colour++, 1},
               epochs,
               take_rows(epochs, [&, m = member](size_t row) { return 100 * run.epochs[row].*m; }),
               o);
    }
  }
  if (panel.series.empty() && runs.size() == 1) {
    const RunData& run = *runs[0];
    panel.empty_reason = run.ranks.empty() ? no_steps_reason(run) : "no rank reports a loss yet";
  }
  // The right axis only when accuracy is drawn.
  bool accuracy = false;
  for (const auto& s : panel.series) accuracy = accuracy || s.axis == 1;
  if (!accuracy) panel.y_axes.resize(1);
  return panel;
}

}  // namespace flotilla::charts::detail
