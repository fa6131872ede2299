#pragma once
// The window's Sweeps tab: every sweep with how many of its points are done,
// running, queued, oom, failed, skipped and refused, the selected sweep's
// points (values, state, run, reason), "Kill sweep", "Compare" (the
// Compare tab on the runs of the selected sweep) and "New sweep…" (the
// sweep designer). The store is read on a thread of its own (SweepLoader,
// every two seconds while the tab is shown, and only when the database
// changed), never on the window's; the kill goes to the controller's worker
// through killRequested.

#include <QObject>
#include <QString>
#include <QThread>
#include <QVector>
#include <QWidget>

#include <memory>
#include <optional>

class QAction;
class QLabel;
class QPushButton;
class QTableWidget;
class QTimer;

namespace flotilla::controller {
class Store;
}

namespace flotilla::gui {

// "batch_size 128, ranks_per_node 2": a point's values as one phrase.
QString point_values_text(const QString& values_json);

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
  std::optional<int64_t> read_version_;  // the database's data_version at the last read
};

class SweepView : public QWidget {
  Q_OBJECT
 public:
  explicit SweepView(const QString& database, QWidget* parent = nullptr);
  ~SweepView() override;

  QTableWidget* sweepTable() const { return sweeps_; }
  QTableWidget* pointTable() const { return points_; }
  QPushButton* killButton() const { return kill_; }
  QPushButton* compareButton() const { return compare_; }
  QPushButton* newSweepButton() const { return new_sweep_; }
  QAction* compareAction() const { return compare_action_; }
  QString selectedSweep() const;
  // Selects the sweep of that name once it is listed (now, or on a later read).
  void selectSweep(const QString& name);
  // The runs of the selected sweep that Compare opens: those of its points
  // that finished or ran out of memory (the compare table keeps OOM rows,
  // as the seeds' tables do), in point order.
  QStringList comparableRuns() const;

 public slots:
  // Reads the store again now (it also does every two seconds).
  void refresh();

 signals:
  // "Kill sweep" confirmed: for the worker, which owns the controller.
  void killRequested(const QString& sweep);
  // "Compare": the runs to open the Compare tab on (two or more).
  void compareRequested(const QStringList& runs);
  void newSweepRequested();
  void loadRequested();

 protected:
  void showEvent(QShowEvent* event) override;

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
  QPushButton* compare_;
  QPushButton* new_sweep_;
  QAction* compare_action_;
  QLabel* status_;
  QString to_select_;  // a sweep asked for before it was listed
};

}  // namespace flotilla::gui

Q_DECLARE_METATYPE(flotilla::gui::SweepItem)
