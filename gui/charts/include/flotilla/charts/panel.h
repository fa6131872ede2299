#pragma once
// What a panel shows, as plain data: a panel builder turns runs' columns and
// the view's options into a title, axes with units, series with their style
// and colour, reference lines with labels, or the sentence saying why the
// panel is empty. The widget draws it, the exporters write it, the tests
// read it; none of them derives a number of its own.
//
// With one run a panel shows per-rank detail; with several (the compare
// view, `flotilla plot` with several --run) each run gets one colour and its
// ranks collapse to the job's total or the lead rank.

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/charts/run_data.h"

namespace flotilla::charts {

enum class PanelKind { throughput, step_time, memory, bandwidth, communication, loss, system };
inline constexpr PanelKind kAllPanels[] = {
    PanelKind::throughput,    PanelKind::step_time, PanelKind::memory, PanelKind::bandwidth,
    PanelKind::communication, PanelKind::loss,      PanelKind::system};
std::string_view name_of(PanelKind kind);  // throughput, step_time, ...
std::optional<PanelKind> panel_kind_from_name(std::string_view name);

enum class XMode {
  step,           // the step number
  wall_time,      // each node's clock, seconds since the Unix epoch
  relative_time,  // seconds since the node's first start record
};
std::string_view name_of(XMode mode);  // step, time, relative
std::optional<XMode> x_mode_from_name(std::string_view name);

struct PanelOptions {
  XMode x = XMode::step;
  double smoothing = 0;                    // 0..0.99: TensorBoard's debiased EMA
  std::optional<std::set<int64_t>> ranks;  // shown ranks; unset: all
  std::optional<std::set<std::string>> nodes;
  std::optional<int64_t> breakdown_rank;  // the step time panel's rank; unset: the lead rank
};

enum class SeriesStyle {
  thin,          // one rank's line
  bold,          // the job's line
  dashed,        // a second quantity of the same colour (received, exposed, ...)
  dotted,        // a third one (busy share, operations/s)
  stacked_area,  // a share of a whole: stacked on the stacked areas before it
  markers,       // sparse points (one an epoch)
  faint_raw,     // the raw values behind a smoothed line
};

struct Series {
  std::string name;  // as the legend shows it
  std::string run;
  std::string unit;     // of y: "samples/s", "ms", "MB/s", "GiB", "%", "x"
  std::string formula;  // where y comes from, in record fields: "bytes_sent / step_ms / 1000"
  SeriesStyle style = SeriesStyle::thin;
  int colour = 0;  // index into the palette
  int axis = 0;    // index into PanelDescription::y_axes
  // The smoothed line this raw series sits behind (its index in `series`);
  // the legend shows one entry for both.
  int raw_of = -1;
  std::shared_ptr<const std::vector<double>> x;
  std::shared_ptr<const std::vector<double>> y;  // a stacked area's own share, not the running sum
};

struct ReferenceLine {
  std::string
      label;  // shown beside the line: "steady after warm-up 1846.5 samples/s" (empty: none)
  std::string legend;  // its legend entry, short as the legend cuts long names (empty: label)
  double y = 0;
  int axis = 0;
  int colour = 0;
};

// A moment on the x axis drawn across the plot: an elastic pipeline's change
// of layout.
struct VerticalMark {
  std::string label;  // its legend entry: "layout 2x2 -> 1x4"
  double x = 0;
  int colour = 0;
};

struct Axis {
  std::string title;  // with its unit: "samples/s", "time per step (ms)"
  bool percent = false;
};

struct PanelDescription {
  PanelKind kind = PanelKind::throughput;
  std::string title;
  XMode x_mode = XMode::step;
  std::string x_title;
  std::vector<Axis> y_axes;  // the first on the left, the others on the right
  std::vector<Series> series;
  std::vector<ReferenceLine> references;
  std::vector<VerticalMark> marks;
  std::string empty_reason;        // when set, the panel shows this sentence instead of a plot
  std::vector<std::string> notes;  // said under the plot: "values <= 0 left out", "coarse"
  bool coarse = false;             // drawn from step buckets while full resolution loads
};

// The panel of `kind` for `runs` (one run: per-rank detail; several: one
// colour a run).
PanelDescription build_panel(PanelKind kind, const std::vector<const RunData*>& runs,
                             const PanelOptions& options);

// The palette colours are indexes into: distinct hues that stay apart on
// white, as #RRGGBB.
std::string_view palette_colour(int index);

}  // namespace flotilla::charts
