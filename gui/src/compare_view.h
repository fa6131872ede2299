#pragma once
// The Compare tab: two or more runs side by side, as `flotilla compare` and
// `flotilla report` line them up. On top the summary table (the controller's
// compare table, one row a run, sortable, against a baseline chosen here)
// and the config diff (only the keys that differ, one column a run); below,
// the dashboard's panels with the runs overlaid, one colour a run. The table
// is computed on the controller worker's thread (requestCompare, answered by
// showTable); while a compared run is live it is asked for again every
// kLiveRefreshMs and the charts follow the run as the dashboard does.

#include <QStringList>
#include <QWidget>

#include <memory>

#include "controller_worker.h"  // the compare table's metatype
#include "flotilla/controller/compare.h"

class QComboBox;
class QLabel;
class QStackedWidget;
class QTableWidget;
class QTabWidget;
class QTimer;
class QToolButton;

namespace flotilla::gui {

class Dashboard;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(const QString& database, QWidget* parent = nullptr);

  static constexpr int kLiveRefreshMs = 2000;

  // Compares `runs` (two or more; the first is the baseline until another is chosen).
  void compare(const QStringList& runs);
  const QStringList& runs() const { return runs_; }
  // Makes `run` (one of the compared) the baseline of the derived columns.
  void setBaseline(const QString& run);
  QString baseline() const;

  // The table shown now (null before the first), and how many were shown.
  const controller::CompareTable* table() const { return table_.get(); }
  int tablesShown() const { return tables_shown_; }
  QTableWidget* summaryTable() const { return summary_; }
  QTableWidget* diffTable() const { return diff_; }
  Dashboard* charts() const { return charts_; }
  QString statusText() const;

  // Writes the summary table as `flotilla compare` prints it: CSV for a
  // .csv file, Markdown (table, baseline, config diff) otherwise. Returns an
  // error message, empty on success.
  QString exportTable(const QString& file) const;
  // Writes every panel that has series as DIR/compare-<panel>.<format>
  // (png or svg); `written` gets the files. Returns the problems, empty on success.
  QString exportCharts(const QString& dir, const QString& format,
                       QStringList* written = nullptr) const;
  // `flotilla report` of the compared runs into `dir` (report.md, summary.csv
  // and the overlaid charts as PNG), written off the window's thread; the
  // answer comes to reportWritten / reportFailed and the status line.
  void exportReport(const QString& dir);

 public slots:
  void reportWritten(const QString& markdown, const QStringList& problems);
  void reportFailed(const QString& message);
  void showTable(std::shared_ptr<const flotilla::controller::CompareTable> table, quint64 request);
  void showFailure(const QString& message, quint64 request);

 signals:
  // To the controller worker.
  void requestCompare(const QStringList& runs, const QString& baseline, quint64 request);
  void requestReport(const QStringList& runs, const QString& baseline, const QString& directory);
  // The report is written: its Markdown file, or empty with the reason.
  void reportDone(const QString& markdown, const QString& problems);

 private:
  void buildControls(QWidget* bar);
  void ask();  // the table of runs_ against the chosen baseline
  void fillSummary(const controller::CompareTable& table);
  void fillDiff(const controller::CompareTable& table);
  void chooseTableFile();
  void chooseChartsDirectory(const QString& format);

  QStringList runs_;
  quint64 request_ = 0;
  bool waiting_ = false;  // a request is out: the live refresh does not pile up more
  std::shared_ptr<const controller::CompareTable> table_;
  int tables_shown_ = 0;
  QString error_;
  QStackedWidget* pages_;
  QLabel *title_, *status_;
  QComboBox* baseline_combo_;
  QToolButton *table_button_, *charts_button_, *report_button_;
  QTabWidget* table_tabs_;
  QTableWidget *summary_, *diff_;
  Dashboard* charts_;
  QTimer* live_timer_;
};

}  // namespace flotilla::gui
