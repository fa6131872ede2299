#include "live_chart.h"

#include <QChart>
#include <QLineSeries>
#include <QValueAxis>

#include <algorithm>

namespace flotilla::gui {

LiveChart::LiveChart(QWidget* parent) : QChartView(parent) {
  setObjectName("liveChart");
  auto* chart = new QChart;
  chart->setTitle("No run selected");
  throughput_ = new QLineSeries(chart);
  throughput_->setName("samples/s");
  loss_ = new QLineSeries(chart);
  loss_->setName("loss");
  chart->addSeries(throughput_);
  chart->addSeries(loss_);
  step_axis_ = new QValueAxis(chart);
  step_axis_->setTitleText("step");
  step_axis_->setLabelFormat("%d");
  throughput_axis_ = new QValueAxis(chart);
  throughput_axis_->setTitleText("samples/s");
  loss_axis_ = new QValueAxis(chart);
  loss_axis_->setTitleText("loss");
  chart->addAxis(step_axis_, Qt::AlignBottom);
  chart->addAxis(throughput_axis_, Qt::AlignLeft);
  chart->addAxis(loss_axis_, Qt::AlignRight);
  throughput_->attachAxis(step_axis_);
  throughput_->attachAxis(throughput_axis_);
  loss_->attachAxis(step_axis_);
  loss_->attachAxis(loss_axis_);
  chart->legend()->setAlignment(Qt::AlignTop);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);
  setMinimumHeight(260);
  redraw_timer_.setInterval(200);
  connect(&redraw_timer_, &QTimer::timeout, this, [this] {
    if (dirty_) redraw();
  });
  redraw_timer_.start();
}

qsizetype LiveChart::throughputPoints() const {
  return throughput_->count();
}
qsizetype LiveChart::lossPoints() const {
  return loss_->count();
}

void LiveChart::showRun(const QString& run, const QVector<ChartSample>& history) {
  run_ = run;
  throughput_points_.clear();
  loss_points_.clear();
  max_throughput_ = max_loss_ = 0;
  chart()->setTitle("Run " + run);
  appendSamples(run, history);
  redraw();
}

void LiveChart::appendSamples(const QString& run, const QVector<ChartSample>& samples) {
  if (run != run_) return;
  for (const auto& s : samples) {
    throughput_points_.push_back({double(s.step), s.samples_per_s});
    loss_points_.push_back({double(s.step), s.loss});
    max_throughput_ = std::max(max_throughput_, s.samples_per_s);
    max_loss_ = std::max(max_loss_, s.loss);
  }
  dirty_ = true;  // drawn on the next tick, however many arrive before it
}

QVector<QPointF> LiveChart::decimate(const QVector<QPointF>& points, int columns) {
  columns = std::max(columns, 1);
  if (points.size() <= 2 * columns) return points;
  QVector<QPointF> out;
  out.reserve(2 * columns);
  const double first = points.front().x(), last = points.back().x();
  const double width = (last - first) / columns;
  qsizetype i = 0;
  for (int column = 0; column < columns && i < points.size(); ++column) {
    const double end = column == columns - 1 ? last : first + width * (column + 1);
    QPointF low = points[i], high = points[i];
    qsizetype low_at = i, high_at = i;
    for (; i < points.size() && points[i].x() <= end; ++i) {
      if (points[i].y() < low.y()) low = points[i], low_at = i;
      if (points[i].y() > high.y()) high = points[i], high_at = i;
    }
    // In x order, so that the line does not double back.
    if (low_at == high_at)
      out.push_back(low);
    else if (low_at < high_at)
      out << low << high;
    else
      out << high << low;
  }
  return out;
}

void LiveChart::redraw() {
  dirty_ = false;
  const int columns = std::max(1, int(chart()->plotArea().width()));
  throughput_->replace(decimate(throughput_points_, columns));
  loss_->replace(decimate(loss_points_, columns));
  if (throughput_points_.isEmpty()) return;
  const double first = throughput_points_.front().x(), last = throughput_points_.back().x();
  step_axis_->setRange(first, std::max(last, first + 1));
  throughput_axis_->setRange(0, std::max(1.0, max_throughput_ * 1.1));
  loss_axis_->setRange(0, std::max(0.1, max_loss_ * 1.1));
}

}  // namespace flotilla::gui
