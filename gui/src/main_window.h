#pragma once
// Flotilla's main window: experiments on the left with the runs below them;
// on the right, tabs: the experiment designer (Save, Run, Kill), the selected
// run's dashboard, the nodes, and the runs selected together compared.
// Everything that touches the database or an agent goes to the worker thread;
// the dashboard reads on a thread of its own. The menus hold every command
// with its shortcut (New from preset, Clone run, Compare configs, Compare
// runs); geometry, splitters, the last tab and column widths are kept
// between launches (QSettings).

#include <QMainWindow>
#include <QSet>
#include <QThread>
#include <QVector>

#include <filesystem>
#include <memory>

#include "controller_worker.h"

class QAction;
class QLabel;
class QListWidget;
class QMenu;
class QPushButton;
class QSplitter;
class QTabWidget;

namespace flotilla::gui {

class CompareView;
class Dashboard;
class ExperimentDesigner;
class NodesView;
class RunList;
struct ConfigSource;
class SweepDesigner;
class SweepView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // How long closing waits for the controller's worker before leaving it.
  static constexpr unsigned long kShutdownWaitMs = 1500;
  // `view_only`: shows the database without a controller (nothing is run,
  // resumed or written), as --screenshot does.
  MainWindow(const QString& database, const std::filesystem::path& agent_binary,
             QWidget* parent = nullptr, bool view_only = false);
  ~MainWindow() override;
  // Workers that a closed window left busy on their own threads. The program
  // must then end without running static destructors under them (see
  // gui_program.cpp): a thread still in an SSH connect outlives main().
  static int workersLeftRunning();

  ExperimentDesigner* form() const { return form_; }
  Dashboard* dashboard() const { return dashboard_; }
  // How long connecting to a node and its agent's answers may take (the
  // worker's; 15 s unless set).
  void setConnectTimeout(int milliseconds);
  NodesView* nodesView() const { return nodes_view_; }
  SweepView* sweepView() const { return sweep_view_; }
  QTabWidget* tabs() const { return tabs_; }
  RunList* runList() const { return run_list_; }
  // Loads `run`'s stored config into the designer under a name no
  // experiment has yet ("NAME-clone", "NAME-clone-2"); false when the run
  // is not listed or has no stored config.
  bool cloneRun(const QString& run);
  // Loads a preset file into the designer; false (and says why) when it cannot be read.
  bool newFromPreset(const QString& file);
  // What Compare configs offers: every stored experiment, then every run.
  QVector<ConfigSource> configSources() const;
  // Selects `run` in the run list (when listed) and shows its dashboard.
  void showRun(const QString& run);
  // The state the run list shows for `run`, empty when it is not listed.
  QString listedState(const QString& run) const;
  CompareView* compareView() const { return compare_view_; }
  // Opens the Compare tab on `runs` (two or more), oldest first.
  void compareRuns(QStringList runs);
  // The runs selected in the run list, oldest first.
  QStringList selectedRuns() const;
  // "New sweep…": the sweep designer over the Experiment tab's experiment,
  // planning and starting through the worker; when it starts a sweep, the
  // Sweeps tab shows it.
  SweepDesigner* openSweepDesigner();

 signals:
  // To the worker thread.
  void requestRefresh();
  void requestSave(const QString& name, const QString& config_json);
  void requestStart(const QString& config_json);
  void requestKill(const QString& run);
  void requestResume(const QString& run);
  void requestAddNode(const flotilla::gui::NodeItem& node);
  void requestUpdateNode(const flotilla::gui::NodeItem& node);
  void requestRemoveNode(const QString& name);
  void requestProbe(const QStringList& names);
  void requestTrustAndProbe(const QString& name, const QString& fingerprint);

 private:
  void buildWidgets();
  void buildActions();
  void restoreSettings();
  void saveSettings() const;
  void showConfigDiff();
  void connectWorker();
  void showExperiments(const QVector<ExperimentItem>& experiments);
  void showRuns(const QVector<RunItem>& runs);
  void updateRunState(const QString& run, const QString& state, const QString& reason);
  void updateButtons();
  // Asks, then kills the selected run; "killing…" until every node confirmed.
  void killSelected();
  // A new attempt of the selected run from its newest checkpoint.
  void resumeSelected();
  void importExperiment();
  void exportExperiment();

  // Left to end on its own when closing finds it busy (an SSH connect to an
  // unreachable node, the store's write patience): see ~MainWindow.
  std::unique_ptr<QThread> worker_thread_;
  ControllerWorker* worker_;
  bool view_only_;
  QVector<ExperimentItem> experiments_;
  QSet<QString> killing_;  // asked to die, not yet confirmed killed
  QListWidget* experiment_list_;
  RunList* run_list_;
  QSplitter* splitter_;
  QTabWidget* tabs_;
  ExperimentDesigner* form_;
  Dashboard* dashboard_;
  NodesView* nodes_view_;
  SweepView* sweep_view_;
  CompareView* compare_view_;
  QPushButton *new_button_, *import_button_, *export_button_;
  QPushButton *run_button_, *kill_button_, *resume_button_, *save_button_, *compare_button_;
  QAction *new_action_, *save_action_, *import_action_, *export_action_, *diff_action_;
  QAction *run_action_, *kill_action_, *resume_action_, *clone_action_, *refresh_action_,
      *compare_action_;
  QAction* new_sweep_action_;
  QMenu* presets_menu_;
  // In the status bar while the database refuses writes: a status message
  // goes after seconds, a refusal lasts until the database takes writes again.
  QLabel* database_status_;
};

}  // namespace flotilla::gui
