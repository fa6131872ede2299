#pragma once
// What a PanelWidget has put on its chart, shared by the files that draw it
// (panel_widget.cpp: series, axes, labels; panel_hover.cpp: the tracker).
// Private to the charts library.

#include <QAbstractAxis>
#include <QAbstractSeries>
#include <QGraphicsLineItem>
#include <QGraphicsRectItem>
#include <QGraphicsTextItem>
#include <QLineSeries>
#include <QList>
#include <QPointF>
#include <QString>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/charts/panel_widget.h"

namespace flotilla::charts {

struct PanelWidget::Drawn {
  std::vector<QAbstractSeries*> series;    // parallel to the description's series
  std::vector<QLineSeries*> upper, lower;  // stacked areas' edges (null elsewhere)
  std::vector<QAbstractAxis*> y_axes;
  QAbstractAxis* x_axis = nullptr;
  std::vector<QLineSeries*> references;
  std::vector<QLineSeries*> marks;  // parallel to the description's marks
  std::vector<QGraphicsTextItem*> reference_labels;  // on a light box: readable over lines
  QGraphicsTextItem* empty_text = nullptr;
  QGraphicsLineItem* cursor = nullptr;
  QGraphicsRectItem* hover_box = nullptr;
  QGraphicsTextItem* hover_label = nullptr;
  QString hover_text;
  std::vector<bool> log_axis;  // per y axis
  // What each series' points were decimated for, and the points.
  struct Decimation {
    uint64_t data = 0;  // PanelWidget::data_version_
    double x0 = 0, x1 = 0;
    int columns = 0;
    bool operator==(const Decimation& o) const {
      return data == o.data && x0 == o.x0 && x1 == o.x1 && columns == o.columns;
    }
    bool operator!=(const Decimation& o) const { return !(*this == o); }
  };
  std::optional<Decimation> decimated;
  std::vector<QList<QPointF>> points;  // parallel to the description's series
};

inline QString q(const std::string& s) {
  return QString::fromStdString(s);
}

// A value as the tracker and the reference labels print it: the digits its
// size needs.
inline QString number_text(double v) {
  if (!std::isfinite(v)) return "—";
  const double magnitude = std::abs(v);
  if (magnitude >= 1e6 || (magnitude > 0 && magnitude < 1e-3)) return QString::number(v, 'g', 4);
  if (magnitude >= 100) return QString::number(v, 'f', 1);
  if (magnitude >= 1) return QString::number(v, 'f', 3);
  return QString::number(v, 'f', 4);
}

// The name the legend shows for a reference line.
inline QString legend_name(const ReferenceLine& r) {
  return q(r.legend.empty() ? r.label : r.legend);
}

// The name the legend shows for series `i` (a raw series shares its smoothed line's).
inline QString legend_name(const PanelDescription& d, size_t i) {
  const auto& s = d.series[i];
  if (s.style == SeriesStyle::faint_raw && s.raw_of >= 0 && size_t(s.raw_of) < d.series.size())
    return q(d.series[size_t(s.raw_of)].name);
  return q(s.name);
}

}  // namespace flotilla::charts
