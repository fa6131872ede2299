#include "panel_chart_view.h"

#include <QMouseEvent>

#include <algorithm>

namespace flotilla::charts {

PanelChartView::PanelChartView(PanelWidget* panel)
    : QChartView(panel), panel_(panel), band_(new QRubberBand(QRubberBand::Rectangle, this)) {
  setMouseTracking(true);
  setMinimumSize(280, 200);
}

std::optional<double> PanelChartView::xAt(QPointF position) const {
  const QRectF plot = chart()->plotArea();
  const QPointF at = mapToScene(position.toPoint());
  const QPointF in_chart = chart()->mapFromScene(at);
  if (!plot.contains(in_chart) || plot.width() <= 0) return std::nullopt;
  const auto [x0, x1] = panel_->xRange();
  return x0 + (in_chart.x() - plot.left()) / plot.width() * (x1 - x0);
}

void PanelChartView::mouseMoveEvent(QMouseEvent* event) {
  if (band_origin_) {
    const QRectF plot = chart()->plotArea();
    const QPointF top_left = mapFromScene(chart()->mapToScene(plot.topLeft()));
    const QPointF bottom_right = mapFromScene(chart()->mapToScene(plot.bottomRight()));
    const double left = std::clamp(std::min(band_origin_->x(), event->position().x()), top_left.x(),
                                   bottom_right.x());
    const double right = std::clamp(std::max(band_origin_->x(), event->position().x()),
                                    top_left.x(), bottom_right.x());
    band_->setGeometry(
        QRect(QPoint(int(left), int(top_left.y())), QPoint(int(right), int(bottom_right.y())))
            .normalized());
    band_->show();
  }
  if (const auto x = xAt(event->position()))
    panel_->sync_->hoverAt(*x);
  else
    panel_->sync_->hoverEnd();
  QGraphicsView::mouseMoveEvent(event);
}

void PanelChartView::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton && xAt(event->position())) {
    band_origin_ = event->position();
    band_->setGeometry(QRect(event->position().toPoint(), QSize()));
    event->accept();
    return;
  }
  QGraphicsView::mousePressEvent(event);
}

void PanelChartView::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton && band_origin_) {
    band_->hide();
    const QPointF from = *band_origin_;
    band_origin_.reset();
    // A click is not a zoom; a drag of a few pixels is.
    if (std::abs(event->position().x() - from.x()) >= 5) {
      const QRectF plot = chart()->plotArea();
      auto value_at = [&](double view_x) {
        const double chart_x = chart()->mapFromScene(mapToScene(QPoint(int(view_x), 0))).x();
        const double share = std::clamp((chart_x - plot.left()) / plot.width(), 0.0, 1.0);
        const auto [x0, x1] = panel_->xRange();
        return x0 + share * (x1 - x0);
      };
      panel_->sync_->zoomTo(value_at(from.x()), value_at(event->position().x()));
    }
    event->accept();
    return;
  }
  QGraphicsView::mouseReleaseEvent(event);
}

void PanelChartView::mouseDoubleClickEvent(QMouseEvent* event) {
  band_origin_.reset();
  band_->hide();
  panel_->sync_->resetZoom();
  event->accept();
}

void PanelChartView::leaveEvent(QEvent* event) {
  panel_->sync_->hoverEnd();
  QChartView::leaveEvent(event);
}

void PanelChartView::resizeEvent(QResizeEvent* event) {
  QChartView::resizeEvent(event);
  panel_->placeLabels();
}

}  // namespace flotilla::charts
