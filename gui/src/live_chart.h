#pragma once
// A run's throughput and loss over its steps, redrawn live. Samples arrive
// as fast as the run makes them and are only buffered; a timer redraws at
// most five times a second, from the buffer decimated to the plot's width in
// pixels (min and max per pixel column, so spikes stay visible).

#include <QChartView>
#include <QTimer>
#include <QVector>

#include "controller_worker.h"

class QLineSeries;
class QValueAxis;

namespace flotilla::gui {

class LiveChart : public QChartView {
  Q_OBJECT
 public:
  explicit LiveChart(QWidget* parent = nullptr);

  // Shows `run` from now on, starting from `history`.
  void showRun(const QString& run, const QVector<ChartSample>& history);
  const QString& run() const { return run_; }
  // All samples received for the shown run (not the decimated points).
  qsizetype sampleCount() const { return throughput_points_.size(); }
  qsizetype throughputPoints() const;
  qsizetype lossPoints() const;

  // Every point in `samples` reduced to at most 2 × `columns` points per series.
  static QVector<QPointF> decimate(const QVector<QPointF>& points, int columns);

 public slots:
  void appendSamples(const QString& run, const QVector<flotilla::gui::ChartSample>& samples);

 private:
  void redraw();

  QString run_;
  // Every sample at full resolution, kept as points (step, value); a redraw
  // only decimates them. The maxima scale the axes.
  QVector<QPointF> throughput_points_, loss_points_;
  double max_throughput_ = 0, max_loss_ = 0;
  bool dirty_ = false;
  QTimer redraw_timer_;
  QLineSeries* throughput_;
  QLineSeries* loss_;
  QValueAxis* step_axis_;
  QValueAxis* throughput_axis_;
  QValueAxis* loss_axis_;
};

}  // namespace flotilla::gui
