#pragma once
// The window's Sweeps tab: every sweep with how many of its points are done,
// running, queued, oom, failed, skipped and refused, the selected sweep's
// points (values, state, run, reason), and "Kill sweep". The store is read
// on a thread of its own (SweepLoader, every two seconds), never on the
// window's; the kill goes to the controller's worker through killRequested.

#include <QObject>
#include <QString>
#include <QThread>
#include <QVector>
#include <QWidget>

#include <memory>

class QLabel;
class QPushButton;
class QTableWidget;
class QTimer;

namespace flotilla::controller {
class Store;
}

namespace flotilla::gui {

struct SweepPointItem {
  qint64 index = 0;
  QString values, state, run, reason;
};

struct SweepItem {
  QString name, state, reason;
  qint64 total = 0, finished = 0, running = 0, queued = 0, oom = 0, failed = 0, killed = 0,
         skipped = 0, refused = 0;
  QVector<SweepPointItem> points;
};

// Reads every sweep and its points from a read-only store; lives on the
// view's thread.
class SweepLoader : public QObject {
  Q_OBJECT
 public:
  explicit SweepLoader(QString database);
  ~SweepLoader() override;

 public slots:
  void load();

 signals:
  void loaded(const QVector<flotilla::gui::SweepItem>& sweeps);
  void failed(const QString& message);

 private:
  QString database_;
  std::unique_ptr<controller::Store> store_;
};

class SweepView : public QWidget {
  Q_OBJECT
 public:
  explicit SweepView(const QString& database, QWidget* parent = nullptr);
  ~SweepView() override;

  QTableWidget* sweepTable() const { return sweeps_; }
  QTableWidget* pointTable() const { return points_; }
  QPushButton* killButton() const { return kill_; }
  QString selectedSweep() const;

 public slots:
  // Reads the store again now (it also does every two seconds).
  void refresh();

 signals:
  // "Kill sweep" confirmed: for the worker, which owns the controller.
  void killRequested(const QString& sweep);
  void loadRequested();

 private:
  void showSweeps(const QVector<SweepItem>& sweeps);
  void showPoints();

  QThread thread_;
  SweepLoader* loader_;
  QTimer* timer_;
  QVector<SweepItem> shown_;
  QTableWidget* sweeps_;
  QTableWidget* points_;
  QPushButton* kill_;
  QLabel* status_;
};

}  // namespace flotilla::gui

Q_DECLARE_METATYPE(flotilla::gui::SweepItem)
