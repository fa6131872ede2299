#pragma once
// The chart view of a PanelWidget: turns the mouse into the panel's hover
// cursor, rubber-band zoom on x and double-click reset.

#include <QChartView>
#include <QRubberBand>

#include <optional>

#include "flotilla/charts/panel_widget.h"

namespace flotilla::charts {

class PanelChartView : public QChartView {
 public:
  explicit PanelChartView(PanelWidget* panel);

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  // The x value under a position in the view, nullopt outside the plot.
  std::optional<double> xAt(QPointF position) const;

  PanelWidget* panel_;
  QRubberBand* band_;
  std::optional<QPointF> band_origin_;
};

}  // namespace flotilla::charts
