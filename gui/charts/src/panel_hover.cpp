// The tracker of a PanelWidget (PlotJuggler's): a vertical cursor at x and
// the value of each visible series there, in a box beside it.
#include <QChart>
#include <QDateTime>
#include <QGraphicsLineItem>
#include <QGraphicsRectItem>
#include <QGraphicsTextItem>
#include <QPen>
#include <QStringList>
#include <QXYSeries>

#include <algorithm>
#include <cmath>

#include "flotilla/charts/panel_widget.h"
#include "panel_widget_drawn.h"

namespace flotilla::charts {

QString PanelWidget::hoverText() const {
  return drawn_->hover_text;
}

qsizetype PanelWidget::drawnPoints(const QString& name) const {
  if (!panel_) return 0;
  for (size_t i = 0; i < drawn_->series.size(); ++i) {
    if (legend_name(panel_->description, i) != name ||
        panel_->description.series[i].style == SeriesStyle::faint_raw)
      continue;
    if (drawn_->upper[i]) return drawn_->upper[i]->count();
    if (auto* xy = qobject_cast<QXYSeries*>(drawn_->series[i])) return xy->count();
  }
  return 0;
}

void PanelWidget::showHover(double x) {
  hover_x_ = x;
  if (!panel_ || !panel_->description.empty_reason.empty() || !(x >= x0_ && x <= x1_)) {
    if (drawn_->cursor) drawn_->cursor->hide();
    if (drawn_->hover_box) drawn_->hover_box->hide();
    drawn_->hover_text.clear();
    return;
  }
  const auto& d = panel_->description;
  // Steps are whole: the cursor snaps to the nearest, whose values it lists
  // (the last point at or before a fractional x was the step before the one
  // the header named). Time is continuous: the last sample at or before x.
  if (d.x_mode == XMode::step) x = std::clamp(std::round(x), x0_, x1_);
  const QRectF plot = chart()->plotArea();
  const double px = plot.left() + (x - x0_) / (x1_ - x0_) * plot.width();
  if (!drawn_->cursor) {
    drawn_->cursor = new QGraphicsLineItem(chart());
    QPen cursor(QColor(60, 60, 60), 1, Qt::SolidLine);
    cursor.setCosmetic(true);
    drawn_->cursor->setPen(cursor);
    drawn_->cursor->setZValue(20);
    drawn_->hover_box = new QGraphicsRectItem(chart());
    drawn_->hover_box->setBrush(QColor(255, 255, 255, 225));
    drawn_->hover_box->setPen(QPen(QColor(150, 150, 150)));
    drawn_->hover_box->setZValue(21);
    drawn_->hover_label = new QGraphicsTextItem(drawn_->hover_box);
  }
  drawn_->cursor->setLine(px, plot.top(), px, plot.bottom());
  drawn_->cursor->show();
  QStringList lines;
  switch (d.x_mode) {
    case XMode::step:
      lines << "step " + QString::number(x, 'f', 0);
      break;
    case XMode::wall_time:
      lines << QDateTime::fromMSecsSinceEpoch(qint64(x * 1000)).toString("HH:mm:ss.zzz");
      break;
    case XMode::relative_time:
      lines << QString::number(x, 'f', 2) + " s";
      break;
  }
  int shown = 0, more = 0;
  for (size_t i = 0; i < d.series.size(); ++i) {
    const auto& s = d.series[i];
    if (s.style == SeriesStyle::faint_raw || !drawn_->series[i]->isVisible()) continue;
    const int64_t at = panel_->pyramids[i].index_at(x);
    if (at < 0) continue;
    if (++shown > 14) {
      ++more;
      continue;
    }
    const double v = (*s.y)[size_t(at)];
    lines << q(s.name) + ": " + number_text(v) + (s.unit.empty() ? "" : " " + q(s.unit));
  }
  if (more) lines << QString("… and %1 more").arg(more);
  drawn_->hover_text = lines.join("\n");
  drawn_->hover_label->setPlainText(drawn_->hover_text);
  const QRectF text = drawn_->hover_label->boundingRect();
  double left = px + 8;
  if (left + text.width() > plot.right()) left = px - 8 - text.width();
  drawn_->hover_box->setRect(0, 0, text.width(), text.height());
  drawn_->hover_box->setPos(std::max(plot.left(), left), plot.top() + 2);
  drawn_->hover_box->show();
}

void PanelWidget::hideHover() {
  hover_x_.reset();
  drawn_->hover_text.clear();
  if (drawn_->cursor) drawn_->cursor->hide();
  if (drawn_->hover_box) drawn_->hover_box->hide();
}

}  // namespace flotilla::charts
