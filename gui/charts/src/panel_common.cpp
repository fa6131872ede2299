#include "panel_common.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "flotilla/charts/transforms.h"
#include "flotilla/protocol/run_metrics.h"

namespace flotilla::charts {

namespace {
constexpr std::pair<PanelKind, std::string_view> kPanelNames[] = {
    {PanelKind::throughput, "throughput"},
    {PanelKind::step_time, "step_time"},
    {PanelKind::memory, "memory"},
    {PanelKind::bandwidth, "bandwidth"},
    {PanelKind::communication, "communication"},
    {PanelKind::loss, "loss"},
    {PanelKind::system, "system"}};
constexpr std::pair<XMode, std::string_view> kXModeNames[] = {
    {XMode::step, "step"}, {XMode::wall_time, "time"}, {XMode::relative_time, "relative"}};
// Tableau 10: hues that stay apart on white and for most colour vision.
constexpr std::string_view kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                         "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

// What the names of compared runs all begin with, up to a separator, when it
// is long enough to be worth leaving out: a sweep's points are
// "vgg-freeze-traffic-3nodes-20261123-220222#1" to "#4", and the legend cuts
// such names before the part that tells them apart.
std::string shared_name_prefix(const std::vector<const RunData*>& runs) {
  constexpr size_t kWorthLeavingOut = 8;
  if (runs.size() < 2) return "";
  std::string prefix = detail::run_label(*runs[0]);
  for (const auto* run : runs) {
    const std::string label = detail::run_label(*run);
    const auto differ = std::mismatch(prefix.begin(), prefix.end(), label.begin(), label.end());
    prefix.erase(differ.first, prefix.end());
  }
  const auto separator = prefix.find_last_of("#-_ ");
  if (separator == std::string::npos) return "";
  // "...#1": the '#' stays with the number; a '-', '_' or ' ' goes.
  prefix.erase(prefix[separator] == '#' ? separator : separator + 1);
  return prefix.size() >= kWorthLeavingOut ? prefix : "";
}

void leave_out_prefix(std::string& text, const std::string& prefix) {
  if (text.rfind(prefix, 0) == 0) text.erase(0, prefix.size());
}
}  // namespace

std::string_view name_of(PanelKind kind) {
  for (const auto& [k, name] : kPanelNames)
    if (k == kind) return name;
  return "?";
}

std::optional<PanelKind> panel_kind_from_name(std::string_view name) {
  for (const auto& [k, n] : kPanelNames)
    if (n == name) return k;
  return std::nullopt;
}

std::string_view name_of(XMode mode) {
  for (const auto& [m, name] : kXModeNames)
    if (m == mode) return name;
  return "?";
}

std::optional<XMode> x_mode_from_name(std::string_view name) {
  for (const auto& [m, n] : kXModeNames)
    if (n == name) return m;
  return std::nullopt;
}

std::string_view palette_colour(int index) {
  if (index == detail::kJobColour) return "#222222";
  if (index == detail::kLimitColour) return "#c0392b";
  const int n = int(std::size(kPalette));
  return kPalette[((index % n) + n) % n];
}

namespace {

// Every panel marks where an elastic pipeline changed layout, at its step
// or its time, in grey (one run) or the run's colour (several).
void add_layout_changes(PanelDescription& panel, const std::vector<const RunData*>& runs,
                        const PanelOptions& options) {
  for (size_t r = 0; r < runs.size(); ++r)
    for (const auto& change : runs[r]->layout_changes) {
      VerticalMark mark;
      mark.label = "layout " + change.words;
      if (runs.size() > 1) mark.label = detail::run_label(*runs[r]) + ": " + mark.label;
      mark.colour = runs.size() > 1 ? int(r) : -1;
      switch (options.x) {
        case XMode::step:
          mark.x = double(change.step);
          break;
        case XMode::wall_time:
          mark.x = change.time;
          break;
        case XMode::relative_time:
          mark.x = change.time - runs[r]->start_time(change.node);
          break;
      }
      if (std::isfinite(mark.x)) panel.marks.push_back(mark);
    }
}

}  // namespace

PanelDescription build_panel(PanelKind kind, const std::vector<const RunData*>& runs,
                             const PanelOptions& options) {
  PanelDescription panel;
  switch (kind) {
    case PanelKind::throughput:
      panel = detail::throughput_panel(runs, options);
      break;
    case PanelKind::step_time:
      panel = detail::step_time_panel(runs, options);
      break;
    case PanelKind::memory:
      panel = detail::memory_panel(runs, options);
      break;
    case PanelKind::bandwidth:
      panel = detail::bandwidth_panel(runs, options);
      break;
    case PanelKind::communication:
      panel = detail::communication_panel(runs, options);
      break;
    case PanelKind::loss:
      panel = detail::loss_panel(runs, options);
      break;
    case PanelKind::system:
      panel = detail::system_panel(runs, options);
      break;
  }
  panel.kind = kind;
  panel.x_mode = options.x;
  panel.x_title = detail::x_title(options.x);
  for (const auto* run : runs) {
    if (run->coarse) panel.coarse = true;
    const bool steps = kind != PanelKind::system || options.x == XMode::step;
    const bool system =
        kind == PanelKind::system || kind == PanelKind::memory || kind == PanelKind::bandwidth;
    for (auto& note : detail::folded_notes(*run, steps, system, runs.size() > 1))
      panel.notes.push_back(note);
  }
  if (panel.empty_reason.empty() && (!panel.series.empty() || !panel.references.empty()))
    add_layout_changes(panel, runs, options);
  if (const std::string prefix = shared_name_prefix(runs); !prefix.empty()) {
    for (auto& series : panel.series) leave_out_prefix(series.name, prefix);
    for (auto& mark : panel.marks) leave_out_prefix(mark.label, prefix);
    for (auto& reference : panel.references) {
      leave_out_prefix(reference.label, prefix);
      leave_out_prefix(reference.legend, prefix);
    }
    for (auto& note : panel.notes) leave_out_prefix(note, prefix);
    panel.notes.push_back("runs named without \"" + prefix +
                          "\", which all their names begin with");
  }
  if (runs.empty()) panel.empty_reason = "no run selected";
  if (panel.empty_reason.empty() && panel.series.empty() && panel.references.empty())
    panel.empty_reason = "nothing to draw for the ranks and nodes chosen";
  return panel;
}

namespace detail {

namespace {
// Keeps the rows whose x is finite and not before the previous one (a
// clock stepping back would fold a line over itself).
void keep(XFrame& frame, size_t row, double x) {
  if (!std::isfinite(x)) return;
  if (!frame.x->empty() && x < frame.x->back()) return;
  frame.x->push_back(x);
  frame.rows.push_back(row);
}

// The rank whose (time, step) pairs place `node`'s system records on the
// step axis: the lowest rank on that node with times.
const RankColumns* clock_rank(const RunData& run, const std::string& node) {
  for (const auto& [r, rank] : run.ranks)
    if (rank.node == node && any_finite(rank.time)) return &rank;
  return nullptr;
}
}  // namespace

bool any_finite(const std::vector<double>& values) {
  return std::any_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

XFrame rank_frame(const RunData& run, const RankColumns& rank, XMode mode) {
  XFrame frame;
  frame.x->reserve(rank.rows());
  frame.rows.reserve(rank.rows());
  const double origin = mode == XMode::relative_time ? run.start_time(rank.node) : 0.0;
  for (size_t i = 0; i < rank.rows(); ++i)
    keep(frame, i, mode == XMode::step ? rank.step[i] : rank.time[i] - origin);
  return frame;
}

XFrame system_frame(const RunData& run, const SystemColumns& system, XMode mode) {
  XFrame frame;
  if (mode != XMode::step) {
    const double origin = mode == XMode::relative_time ? run.start_time(system.node) : 0.0;
    for (size_t i = 0; i < system.rows(); ++i) keep(frame, i, system.time[i] - origin);
    return frame;
  }
  // On the step axis a sample sits where the node's ranks were at its time:
  // interpolated between the steps around it; samples outside the steps
  // (loading, shutting down) have no step.
  const RankColumns* clock = clock_rank(run, system.node);
  if (!clock) return frame;
  std::vector<double> times, steps;
  for (size_t i = 0; i < clock->rows(); ++i)
    if (std::isfinite(clock->time[i]) && (times.empty() || clock->time[i] >= times.back())) {
      times.push_back(clock->time[i]);
      steps.push_back(clock->step[i]);
    }
  if (times.empty()) return frame;
  for (size_t i = 0; i < system.rows(); ++i) {
    const double t = system.time[i];
    if (t < times.front() || t > times.back()) continue;
    const size_t after = size_t(std::lower_bound(times.begin(), times.end(), t) - times.begin());
    if (after == 0 || times[after] == t) {
      keep(frame, i, steps[after]);
      continue;
    }
    const double share = (t - times[after - 1]) / (times[after] - times[after - 1]);
    keep(frame, i, steps[after - 1] + share * (steps[after] - steps[after - 1]));
  }
  return frame;
}

XFrame epoch_frame(const RunData& run, XMode mode) {
  XFrame frame;
  const int64_t lead = run.lead_rank();
  const auto lead_it = run.ranks.find(lead);
  const double origin = mode == XMode::relative_time && lead_it != run.ranks.end()
                            ? run.start_time(lead_it->second.node)
                            : 0.0;
  for (size_t i = 0; i < run.epochs.size(); ++i) {
    const auto& e = run.epochs[i];
    keep(frame, i, mode == XMode::step ? e.step : e.time - origin);
  }
  return frame;
}

std::shared_ptr<std::vector<double>> take(const std::vector<double>& column, const XFrame& frame,
                                          const std::function<double(double)>& f) {
  auto y = std::make_shared<std::vector<double>>();
  y->reserve(frame.rows.size());
  for (size_t row : frame.rows) {
    const double v = row < column.size() ? column[row] : kMissing;
    y->push_back(f ? f(v) : v);
  }
  return y;
}

std::shared_ptr<std::vector<double>> take_rows(const XFrame& frame,
                                               const std::function<double(size_t)>& f) {
  auto y = std::make_shared<std::vector<double>>();
  y->reserve(frame.rows.size());
  for (size_t row : frame.rows) y->push_back(f(row));
  return y;
}

void add_line(PanelDescription& panel, const LineSpec& spec, const XFrame& frame,
              std::shared_ptr<std::vector<double>> y, const PanelOptions& options) {
  if (frame.empty() || !any_finite(*y)) return;
  Series s;
  s.name = spec.name;
  s.run = spec.run;
  s.unit = spec.unit;
  s.formula = spec.formula;
  s.style = spec.style;
  s.colour = spec.colour;
  s.axis = spec.axis;
  s.x = frame.x;
  const bool smoothed = options.smoothing > 0 && spec.style != SeriesStyle::markers &&
                        spec.style != SeriesStyle::stacked_area;
  if (smoothed) {
    Series raw = s;
    raw.name = spec.name + " (raw)";
    raw.style = SeriesStyle::faint_raw;
    raw.y = y;
    raw.raw_of = int(panel.series.size()) + 1;
    panel.series.push_back(std::move(raw));
    s.y = std::make_shared<std::vector<double>>(smooth_ema(*y, options.smoothing));
  } else {
    s.y = y;
  }
  panel.series.push_back(std::move(s));
}

void add_rank_field(PanelDescription& panel, const RunData& run, const RankColumns& rank,
                    const std::string& field, const LineSpec& spec, const PanelOptions& options,
                    const std::function<double(double)>& f) {
  const auto* column = rank.field(field);
  if (!column) return;
  const XFrame frame = rank_frame(run, rank, options.x);
  add_line(panel, spec, frame, take(*column, frame, f), options);
}

bool rank_shown(const RankColumns& rank, const PanelOptions& options) {
  if (options.ranks && !options.ranks->count(rank.rank)) return false;
  return node_shown(rank.node, options);
}

bool node_shown(const std::string& node, const PanelOptions& options) {
  return !options.nodes || options.nodes->count(node);
}

bool any_nonzero(const RunData& run, const std::string& field, const PanelOptions& options) {
  for (const auto& [r, rank] : run.ranks) {
    if (!rank_shown(rank, options)) continue;
    if (const auto* column = rank.field(field))
      for (double v : *column)
        if (std::isfinite(v) && v != 0) return true;
  }
  return false;
}

std::string x_title(XMode mode) {
  switch (mode) {
    case XMode::step:
      return "step";
    case XMode::wall_time:
      return "wall clock (each node's own)";
    case XMode::relative_time:
      return "time since the node's start (s)";
  }
  return {};
}

std::string run_label(const RunData& run) {
  const std::string& id = run.run.id;
  if (run.run.experiment_name.empty()) return id;
  return run.run.experiment_name + " \u00b7 " + (id.size() > 4 ? id.substr(id.size() - 4) : id);
}

std::string rank_label(const RankColumns& rank) {
  std::string label = "rank " + std::to_string(rank.rank);
  if (!rank.stage) return label;
  const bool moved =
      rank.last_stage && (*rank.last_stage != *rank.stage || rank.last_replica != rank.replica);
  if (moved) {
    // An elastic pipeline's rank: where it started, where it is now.
    label += " (stage " + std::to_string(*rank.stage) + "\u2192" +
             std::to_string(*rank.last_stage) + ", replica " + std::to_string(rank.replica) +
             "\u2192" + std::to_string(rank.last_replica) + ")";
    return label;
  }
  label += " (stage " + std::to_string(*rank.stage);
  if (rank.replica > 0) label += ", replica " + std::to_string(rank.replica);
  label += ")";
  return label;
}

std::string label_number(double value, int significant) {
  if (!std::isfinite(value)) return "—";
  char buffer[64];
  const double magnitude = std::abs(value);
  std::to_chars_result result;
  if (magnitude >= 1e7 || (magnitude > 0 && magnitude < 1e-3)) {
    result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general,
                           significant);
  } else {
    // Enough decimals for `significant` digits, none beyond the unit for large values.
    const int digits = magnitude >= 1 ? int(std::floor(std::log10(magnitude))) + 1 : 1;
    const int decimals = std::clamp(significant - digits, 0, 6);
    result =
        std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, decimals);
  }
  return std::string(buffer, result.ptr);
}

std::string no_steps_reason(const RunData& run) {
  const auto state = controller::name_of(run.run.state);
  const std::string why = run.run.reason.substr(0, run.run.reason.find('\n'));
  // A queued run says what it waits for (SLURM's reason).
  if (run.run.state == controller::RunState::queued && !why.empty())
    return "no step records yet: the run is queued (" + why + ")";
  if (!controller::is_terminal(run.run.state))
    return "no step records yet: the run is " + std::string(state);
  std::string reason =
      "no step records: the run ended " + std::string(state) + " before its first step";
  if (!why.empty()) reason += " (" + why + ")";
  return reason;
}

std::optional<std::string> missing_times_reason(const RunData& run, XMode mode) {
  if (mode == XMode::step || run.has_times() || run.ranks.empty()) return std::nullopt;
  return "these records carry no time (stored before the agents stamped them): use x = step";
}

std::optional<double> run_throughput(const RunData& run) {
  const auto lead = run.ranks.find(run.lead_rank());
  if (lead == run.ranks.end() || run.coarse) return std::nullopt;
  const auto& rank = lead->second;
  const auto* samples = rank.field("samples");
  const auto* rate = rank.field("samples_per_s");
  if (!samples || !rate) return std::nullopt;
  // metrics::throughput() with a folded row (a bucket's means) standing for
  // the steps it holds, and the warm-up's steps off the front, a bucket in
  // part when it straddles the end of warm-up.
  std::vector<size_t> rows;
  int64_t steps = 0;
  for (size_t i = 0; i < rank.rows() && i < samples->size() && i < rate->size(); ++i)
    if ((*samples)[i] > 0 && (*rate)[i] > 0 && std::isfinite((*samples)[i]) &&
        std::isfinite((*rate)[i])) {
      rows.push_back(i);
      steps += rank.steps_in(i);
    }
  int64_t skip = metrics::warmup_steps(steps);
  double work = 0, seconds = 0;
  for (size_t i : rows) {
    const int64_t skipped = std::min(skip, rank.steps_in(i));
    skip -= skipped;
    const auto kept = double(rank.steps_in(i) - skipped);
    work += (*samples)[i] * kept;
    seconds += (*samples)[i] / (*rate)[i] * kept;
  }
  if (!(seconds > 0)) return std::nullopt;
  return work / seconds;
}

std::vector<std::pair<double, int64_t>> weighted_after_warmup(const RankColumns& rank,
                                                              const std::vector<double>& column,
                                                              bool finite_first) {
  std::vector<std::pair<double, int64_t>> rows;
  int64_t steps = 0;
  for (size_t i = 0; i < column.size() && i < rank.rows(); ++i) {
    if (finite_first && !std::isfinite(column[i])) continue;
    rows.emplace_back(column[i], rank.steps_in(i));
    steps += rows.back().second;
  }
  // The warm-up's steps come off the front, a bucket in part when it straddles the end of warm-up.
  int64_t skip = metrics::warmup_steps(steps);
  std::vector<std::pair<double, int64_t>> kept;
  for (auto [value, weight] : rows) {
    const int64_t skipped = std::min(skip, weight);
    skip -= skipped;
    if (weight - skipped > 0 && std::isfinite(value)) kept.emplace_back(value, weight - skipped);
  }
  return kept;
}

std::string people_number(double value) {
  if (!std::isfinite(value)) return "—";
  if (value == std::round(value) && std::abs(value) < 1e15) {
    // Whole: its digits in groups of three ("4,098", not "4098.00000").
    std::string digits = std::to_string(int64_t(std::abs(value)));
    for (int at = int(digits.size()) - 3; at > 0; at -= 3) digits.insert(size_t(at), ",");
    return (value < 0 ? "-" : "") + digits;
  }
  std::string text = label_number(value, 3);
  if (text.find('.') != std::string::npos && text.find('e') == std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text;
}

std::vector<std::string> folded_notes(const RunData& run, bool steps, bool system, bool named) {
  std::vector<std::string> notes;
  const std::string who = named ? run_label(run) + ": " : "";
  if (steps && run.steps_folded())
    notes.push_back(who + "steps before " + people_number(run.folded_before_step) +
                    " drawn as means of " + people_number(double(run.step_bucket)) +
                    "-step buckets, the newest step by step (a live run's older steps are kept "
                    "coarse so that the window's memory stays bounded)");
  if (system)
    for (const auto& [node, s] : run.systems)
      if (s.folded_rows > 0)
        notes.push_back(who + node + "'s system samples older than " +
                        people_number(run.limits ? run.limits->recent_system_seconds / 60 : 0) +
                        " min drawn as means of " + people_number(s.bucket_seconds) + " s");
  return notes;
}

}  // namespace detail
}  // namespace flotilla::charts
