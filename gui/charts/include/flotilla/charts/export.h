#pragma once
// Panels written to files: PNG and SVG of what the panel draws, CSV of every
// value of its series (not the decimated points; numbers in the C locale,
// each reading back as the same double), and the headless renderer behind
// `flotilla-gui --render` and `flotilla plot`.

#include <QSize>
#include <QString>

#include <string>
#include <vector>

#include "flotilla/charts/panel.h"

namespace flotilla::charts {

// The panel's series as CSV: one row a point, `run,series,unit,<x>,value`
// (plus `smoothed` when the panel is smoothed), <x> being step, time_s or
// relative_s. Raw values, every point.
std::string panel_csv(const PanelDescription& panel);

struct RenderRequest {
  std::string database;
  std::vector<std::string> runs;
  PanelKind panel = PanelKind::throughput;
  PanelOptions options;
  QSize size{1000, 560};
  QString output;  // .png or .svg
};

// Loads the runs (read-only), builds the panel and writes it; needs a
// QApplication (the offscreen platform will do). Returns an error message
// naming what is wrong (unknown run, unwritable file, other schema), empty
// on success.
QString render_panel(const RenderRequest& request);

}  // namespace flotilla::charts
