#pragma once
// Flotilla's main window: experiments on the left with the runs below them;
// on the right, tabs: the experiment designer (Save, Run, Kill), the selected
// run's dashboard and the nodes. Everything that touches the database or an agent goes to
// the worker thread; the dashboard reads on a thread of its own.

#include <QMainWindow>
#include <QSet>
#include <QThread>
#include <QVector>

#include <filesystem>

#include "controller_worker.h"

class QListWidget;
class QPushButton;
class QTabWidget;
class QTableWidget;

namespace flotilla::gui {

class Dashboard;
class ExperimentDesigner;
class NodesView;
class SweepView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // `view_only`: shows the database without a controller (nothing is run,
  // resumed or written), as --screenshot does.
  MainWindow(const QString& database, const std::filesystem::path& agent_binary,
             QWidget* parent = nullptr, bool view_only = false);
  ~MainWindow() override;

  ExperimentDesigner* form() const { return form_; }
  Dashboard* dashboard() const { return dashboard_; }
  NodesView* nodesView() const { return nodes_view_; }
  SweepView* sweepView() const { return sweep_view_; }
  QTabWidget* tabs() const { return tabs_; }
  // Selects `run` in the run list (when listed) and shows its dashboard.
  void showRun(const QString& run);
  // The state the run list shows for `run`, empty when it is not listed.
  QString listedState(const QString& run) const;

 signals:
  // To the worker thread.
  void requestRefresh();
  void requestSave(const QString& name, const QString& config_json);
  void requestStart(const QString& config_json);
  void requestKill(const QString& run);
  void requestAddNode(const flotilla::gui::NodeItem& node);
  void requestUpdateNode(const flotilla::gui::NodeItem& node);
  void requestRemoveNode(const QString& name);
  void requestProbe(const QStringList& names);
  void requestTrustAndProbe(const QString& name);

 private:
  void buildWidgets();
  void connectWorker();
  void showExperiments(const QVector<ExperimentItem>& experiments);
  void showRuns(const QVector<RunItem>& runs);
  void updateRunState(const QString& run, const QString& state, const QString& reason);
  void selectRun(const QString& run);
  QString selectedRun() const;
  void updateButtons();
  // Shows "killing…" as `run`'s state until every node confirmed the kill.
  void showKilling(const QString& run);
  void importExperiment();
  void exportExperiment();

  QThread worker_thread_;
  ControllerWorker* worker_;
  QVector<ExperimentItem> experiments_;
  QVector<RunItem> runs_;  // as the table shows them
  QSet<QString> killing_;  // asked to die, not yet confirmed killed
  QListWidget* experiment_list_;
  QTableWidget* run_table_;
  QTabWidget* tabs_;
  ExperimentDesigner* form_;
  Dashboard* dashboard_;
  NodesView* nodes_view_;
  SweepView* sweep_view_;
  QPushButton *run_button_, *kill_button_, *save_button_;
};

}  // namespace flotilla::gui
