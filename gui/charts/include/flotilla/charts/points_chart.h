#pragma once
// A study's chart in its seed's shape: one figure per run (or per seed row)
// against a value of its configuration, such as speed-up against GPUs,
// memory against batch size with the batches that ran out of memory, or
// accuracy against bits; the seed's published points beside ours. The
// controller writes its data beside a study report (study_chart.json) and
// `flotilla-gui --render-points` draws it.
//
// The data, as JSON: {"title", "x_label", "y_label", "series": [{"name",
// "source": "ours" | "seed", "points": [{"x": number or text, "y": number
// or null, "oom": bool}]}]}. A point with "oom" ran out of memory (no y); a
// text x makes the x axis categories, in the order they first appear.

#include <QChart>
#include <QSize>
#include <QString>

#include <optional>
#include <string>
#include <vector>

namespace flotilla::charts {

struct ChartPoint {
  QString x;                      // as the axis labels it
  std::optional<double> x_value;  // set for every point when the x axis is numeric
  std::optional<double> y;
  bool oom = false;
};

struct ChartLine {
  QString name;
  bool seed = false;  // the seed's published points, not a run's
  std::vector<ChartPoint> points;
};

struct PointsChartData {
  QString title, x_label, y_label;
  std::vector<ChartLine> lines;
  bool numeric_x = true;
};

// Parses the JSON above; an error message naming `source` and what is wrong
// instead of the data.
struct ParsedPointsChart {
  std::optional<PointsChartData> data;
  QString error;
};
ParsedPointsChart parse_points_chart(const std::string& json_text, const QString& source);

// The chart: per line of ours a solid line with filled markers, per seed line
// a dashed one with hollow markers in the same colour, out-of-memory points
// as squares of the line's colour at the axis's far end; a numeric x across
// (log 2 when its values span 4x or more and are all positive), text x as
// categories down the left side with the figures across; the seed's figures
// on their own axis when they are of another scale. The caller owns it.
QChart* build_points_chart(const PointsChartData& data);

// Draws the chart into `output` (.png or .svg) at `size`; needs a
// QApplication. An error message, empty on success.
QString render_points_chart(const PointsChartData& data, QSize size, const QString& output);

}  // namespace flotilla::charts
