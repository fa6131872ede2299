#pragma once
// What every panel builder shares: x per mode, taking columns at those x,
// adding a line with its smoothed twin, colours and units.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flotilla/charts/panel.h"

namespace flotilla::charts::detail {

// Colours beyond the palette's hues.
inline constexpr int kJobColour = 100;    // the job's total: near black
inline constexpr int kLimitColour = 101;  // limits and bounds: red

// The x of a set of rows in one x mode, with the rows that have one (rows
// without a time have no x in the time modes and are left out).
struct XFrame {
  std::shared_ptr<std::vector<double>> x = std::make_shared<std::vector<double>>();
  std::vector<size_t> rows;
  bool empty() const { return x->empty(); }
};

XFrame rank_frame(const RunData& run, const RankColumns& rank, XMode mode);
XFrame system_frame(const RunData& run, const SystemColumns& system, XMode mode);
// Epochs at their last step (step mode) or their record's time.
XFrame epoch_frame(const RunData& run, XMode mode);

// `column` at the frame's rows, through `f`.
std::shared_ptr<std::vector<double>> take(const std::vector<double>& column, const XFrame& frame,
                                          const std::function<double(double)>& f = {});
// `f(row)` at the frame's rows.
std::shared_ptr<std::vector<double>> take_rows(const XFrame& frame,
                                               const std::function<double(size_t)>& f);

struct LineSpec {
  std::string name, run, unit, formula;
  SeriesStyle style = SeriesStyle::thin;
  int colour = 0;
  int axis = 0;
};

// Adds a line; with smoothing, the smoothed line goes in front of its raw
// values drawn faint.
void add_line(PanelDescription& panel, const LineSpec& spec, const XFrame& frame,
              std::shared_ptr<std::vector<double>> y, const PanelOptions& options);
// A rank's field as a line (y = f(field)); nothing when the rank lacks it.
void add_rank_field(PanelDescription& panel, const RunData& run, const RankColumns& rank,
                    const std::string& field, const LineSpec& spec, const PanelOptions& options,
                    const std::function<double(double)>& f = {});

bool rank_shown(const RankColumns& rank, const PanelOptions& options);
bool node_shown(const std::string& node, const PanelOptions& options);
// Whether any shown rank has `field` with a finite value other than 0.
bool any_nonzero(const RunData& run, const std::string& field, const PanelOptions& options);
bool any_finite(const std::vector<double>& values);

std::string x_title(XMode mode);
// "rank 1" or, in a pipeline, "rank 1 (stage 1)".
std::string rank_label(const RankColumns& rank);
// A run among several overlaid: its experiment and the end of its id
// ("ddp2 · 1c62"), short enough for a legend, still one run's own.
std::string run_label(const RunData& run);
// A number for a label, in the C locale: 1846.5, 0.25, 3.1e-05.
std::string label_number(double value, int significant = 4);
// A number as a person reads it in a sentence: whole ones in groups of
// three ("4,098"), others with three significant digits and no trailing
// zeros ("2.5").
std::string people_number(double value);

// Sentences for panels without data.
std::string no_steps_reason(const RunData& run);
// When the x mode needs times that these records lack.
std::optional<std::string> missing_times_reason(const RunData& run, XMode mode);

// The run's steady throughput as the protocol defines it (run_metrics.h: the
// job's samples over their wall time after warm-up), from the lead rank's
// step records. A folded row (RowLimits) counts as many steps as it holds,
// each with the bucket's mean samples and rate.
std::optional<double> run_throughput(const RunData& run);

// `column` of `rank` after warm-up (metrics::warmup_steps), as (value, steps
// the row stands for): warm-up counts steps, a folded row as the steps it
// holds. `finite_first`: missing values are left out before warm-up is
// counted (as a run's throughput is), else after (as a mean over steps).
std::vector<std::pair<double, int64_t>> weighted_after_warmup(const RankColumns& rank,
                                                              const std::vector<double>& column,
                                                              bool finite_first);
// What a panel says under it when `run` holds folded rows (steps, and system
// samples when `system`); `named`: the notes begin with the run's label.
std::vector<std::string> folded_notes(const RunData& run, bool steps, bool system, bool named);

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

PanelDescription throughput_panel(const std::vector<const RunData*>& runs, const PanelOptions& o);
PanelDescription step_time_panel(const std::vector<const RunData*>& runs, const PanelOptions& o);
PanelDescription loss_panel(const std::vector<const RunData*>& runs, const PanelOptions& o);
PanelDescription memory_panel(const std::vector<const RunData*>& runs, const PanelOptions& o);
PanelDescription bandwidth_panel(const std::vector<const RunData*>& runs, const PanelOptions& o);
PanelDescription communication_panel(const std::vector<const RunData*>& runs,
                                     const PanelOptions& o);
PanelDescription system_panel(const std::vector<const RunData*>& runs, const PanelOptions& o);

}  // namespace flotilla::charts::detail
