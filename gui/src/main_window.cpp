#include "main_window.h"

#include <QAction>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>

#include "background_thread.h"
#include "compare_view.h"
#include "config_diff.h"
#include "dashboard.h"
#include "experiment_designer.h"
#include "flotilla/protocol/experiment_config.h"
#include "nodes_view.h"
#include "presets.h"
#include "run_list.h"
#include "sweep_designer.h"
#include "sweep_view.h"

namespace flotilla::gui {
namespace {
// Why the run cannot be resumed, or empty when it can: it ended without
// finishing, and its config saved checkpoints.
QString resume_refusal(const RunItem* item) {
  if (!item) return "Select one run";
  if (item->state != "failed" && item->state != "killed" && item->state != "oom")
    return "Only a failed, killed or oom run can be resumed; this one is " + item->state;
  const auto config = nlohmann::json::parse(item->config_json.toStdString(), nullptr, false);
  const auto save = config.is_object() ? config.value("save", nlohmann::json::object())
                                       : nlohmann::json::object();
  if (save.value("every_steps", 0) <= 0 && save.value("every_minutes", 0.0) <= 0)
    return "This run saved no checkpoints (its config has no save.every_steps or "
           "save.every_minutes)";
  return {};
}

// Kept between launches; one file per user (QSettings' INI under ~/.config).
const char* const kSettingsOrganisation = "flotilla";
const char* const kSettingsApplication = "flotilla-gui";

// "Run the experiment (Ctrl+R)": an action's words and its shortcut, for a tool tip.
QString with_shortcut(const QAction* action, const QString& words) {
  const QString keys = action->shortcut().toString(QKeySequence::NativeText);
  return keys.isEmpty() ? words : words + " (" + keys + ")";
}
}  // namespace

MainWindow::MainWindow(const QString& database, const std::filesystem::path& agent_binary,
                       QWidget* parent, bool view_only)
    : QMainWindow(parent),
      worker_thread_(std::make_unique<QThread>()),
      worker_(new ControllerWorker(database, agent_binary, view_only)),
      view_only_(view_only) {
  setWindowTitle("Flotilla — " + database);
  dashboard_ = new Dashboard(database);
  compare_view_ = new CompareView(database);
  sweep_view_ = new SweepView(database);
  sweep_view_->setObjectName("sweepView");
  buildWidgets();
  buildActions();
  updateButtons();
  // A screenshot shows the window as built, whatever the last session left.
  if (!view_only_) restoreSettings();
  worker_->moveToThread(worker_thread_.get());
  connect(worker_thread_.get(), &QThread::finished, worker_, &QObject::deleteLater);
  connectWorker();
  start_below_the_window(*worker_thread_, "controller");
  QMetaObject::invokeMethod(worker_, &ControllerWorker::open, Qt::QueuedConnection);
  // Runs started elsewhere (the CLI) show up too.
  // Read only when the database changed.
  auto* poll = new QTimer(this);
  connect(poll, &QTimer::timeout, worker_, &ControllerWorker::refreshIfChanged);
  poll->start(3000);
}

namespace {
std::atomic<int> workers_left_running{0};
}  // namespace

int MainWindow::workersLeftRunning() {
  return workers_left_running;
}

MainWindow::~MainWindow() {
  if (!view_only_) saveSettings();
  // Closing returns in bounded time: the worker may sit in an SSH connect to
  // an unreachable node or in the store's write patience (seconds). The runs
  // go on on their nodes either way; a worker still busy is left to finish on
  // its own thread, which deletes it (and then itself) when it ends.
  worker_thread_->quit();
  if (!worker_thread_->wait(kShutdownWaitMs)) {
    QThread* thread = worker_thread_.release();
    ++workers_left_running;
    connect(
        thread, &QThread::finished, thread, [] { --workers_left_running; }, Qt::DirectConnection);
    connect(thread, &QThread::finished, thread, &QObject::deleteLater);
    if (thread->isFinished()) thread->deleteLater();
  }
}

void MainWindow::setConnectTimeout(int milliseconds) {
  QMetaObject::invokeMethod(
      worker_, [worker = worker_, milliseconds] { worker->setConnectTimeout(milliseconds); },
      Qt::QueuedConnection);
}

void MainWindow::buildWidgets() {
  experiment_list_ = new QListWidget;
  experiment_list_->setObjectName("experimentList");
  run_list_ = new RunList;
  run_list_->setObjectName("runList");

  new_button_ = new QPushButton("New");
  import_button_ = new QPushButton("Import…");
  export_button_ = new QPushButton("Export…");
  save_button_ = new QPushButton("Save");
  save_button_->setObjectName("saveButton");
  run_button_ = new QPushButton("Run");
  run_button_->setObjectName("runButton");
  kill_button_ = new QPushButton("Kill");
  kill_button_->setObjectName("killButton");
  resume_button_ = new QPushButton("Resume");
  resume_button_->setObjectName("resumeButton");

  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  auto* experiment_buttons = new QHBoxLayout;
  for (auto* b : {new_button_, import_button_, export_button_}) experiment_buttons->addWidget(b);
  left_layout->addWidget(experiment_list_, 1);
  left_layout->addLayout(experiment_buttons);
  left_layout->addWidget(run_list_, 2);
  compare_button_ = new QPushButton("Compare");
  compare_button_->setObjectName("compareButton");
  left_layout->addWidget(compare_button_);

  // Right: the designer with its buttons, the selected run's dashboard, the nodes.
  form_ = new ExperimentDesigner;
  nodes_view_ = new NodesView;
  nodes_view_->setObjectName("nodesView");
  auto* experiment = new QWidget;
  auto* experiment_layout = new QHBoxLayout(experiment);
  experiment_layout->addWidget(form_, 1);
  auto* run_buttons = new QVBoxLayout;
  for (auto* b : {save_button_, run_button_, kill_button_, resume_button_})
    run_buttons->addWidget(b);
  run_buttons->addStretch();
  experiment_layout->addLayout(run_buttons);
  tabs_ = new QTabWidget;
  tabs_->setObjectName("mainTabs");
  tabs_->addTab(experiment, "Experiment");
  tabs_->addTab(dashboard_, "Dashboard");
  tabs_->addTab(nodes_view_, "Nodes");
  tabs_->addTab(compare_view_, "Compare");
  tabs_->addTab(sweep_view_, "Sweeps");

  splitter_ = new QSplitter;
  splitter_->setObjectName("mainSplitter");
  splitter_->addWidget(left);
  splitter_->addWidget(tabs_);
  splitter_->setStretchFactor(1, 3);
  setCentralWidget(splitter_);
  database_status_ = new QLabel;
  database_status_->setObjectName("databaseStatus");
  database_status_->setStyleSheet(
      "QLabel { color: white; background: #c0392b; padding: 1px 6px; }");
  database_status_->hide();
  statusBar()->addPermanentWidget(database_status_);
  resize(1500, 950);
  splitter_->setSizes({420, 1080});

  connect(experiment_list_, &QListWidget::currentRowChanged, this, [this](int row) {
    if (row < 0 || row >= experiments_.size()) return;
    form_->setConfigJson(experiments_[row].config_json);
    tabs_->setCurrentIndex(0);
  });
  connect(run_list_, &RunList::selectionChanged, this, [this] {
    const QStringList runs = run_list_->selectedRuns();
    if (runs.size() == 1) {
      const QString run = runs.front();
      dashboard_->showRun(run);
      tabs_->setCurrentWidget(dashboard_);
    }
    updateButtons();
  });
  connect(form_, &ExperimentDesigner::edited, this, &MainWindow::updateButtons);
}

void MainWindow::buildActions() {
  auto action = [this](const QString& text, const char* name, const QKeySequence& keys) {
    auto* a = new QAction(text, this);
    a->setObjectName(name);
    a->setShortcut(keys);
    a->setShortcutContext(Qt::WindowShortcut);
    addAction(a);  // the shortcut works wherever the focus is in the window
    return a;
  };
  new_action_ = action("&New experiment", "actionNew", QKeySequence::New);
  save_action_ = action("&Save experiment", "actionSave", QKeySequence::Save);
  import_action_ = action("&Import…", "actionImport", {});
  export_action_ = action("&Export…", "actionExport", {});
  diff_action_ = action("&Compare configs…", "actionDiff", {});
  run_action_ = action("&Run", "actionRun", QKeySequence(Qt::CTRL | Qt::Key_R));
  kill_action_ = action("&Kill run…", "actionKill", QKeySequence(Qt::CTRL | Qt::Key_K));
  resume_action_ = action("Re&sume run from its checkpoint", "actionResume", {});
  clone_action_ =
      action("&Duplicate run into the designer", "actionClone", QKeySequence(Qt::CTRL | Qt::Key_D));
  refresh_action_ = action("Re&fresh", "actionRefresh", QKeySequence(Qt::Key_F5));
  compare_action_ = action("Co&mpare selected runs", "actionCompare",
                           QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C));
  new_sweep_action_ =
      action("New s&weep…", "actionNewSweep", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_N));

  auto* experiment_menu = menuBar()->addMenu("&Experiment");
  experiment_menu->addAction(new_action_);
  presets_menu_ = experiment_menu->addMenu("New from &preset");
  presets_menu_->setObjectName("presetsMenu");
  const QStringList presets = preset_files();
  for (const auto& file : presets) {
    auto* preset = presets_menu_->addAction(QFileInfo(file).completeBaseName());
    preset->setObjectName("preset:" + QFileInfo(file).completeBaseName());
    preset->setToolTip(file);
    connect(preset, &QAction::triggered, this, [this, file] { newFromPreset(file); });
  }
  if (presets.isEmpty()) presets_menu_->addAction("No presets found")->setEnabled(false);
  experiment_menu->addAction(save_action_);
  experiment_menu->addAction(new_sweep_action_);
  experiment_menu->addSeparator();
  experiment_menu->addAction(import_action_);
  experiment_menu->addAction(export_action_);
  experiment_menu->addSeparator();
  experiment_menu->addAction(diff_action_);
  auto* run_menu = menuBar()->addMenu("&Run");
  for (auto* a : {run_action_, kill_action_, resume_action_, clone_action_, compare_action_})
    run_menu->addAction(a);
  run_menu->addSeparator();
  run_menu->addAction(refresh_action_);

  // The run list's own menu (right click) for the selected run.
  run_list_->table()->setContextMenuPolicy(Qt::ActionsContextMenu);
  run_list_->table()->addAction(clone_action_);
  run_list_->table()->addAction(kill_action_);
  run_list_->table()->addAction(resume_action_);
  run_list_->table()->addAction(compare_action_);

  connect(new_action_, &QAction::triggered, this,
          [this] { form_->setConfigJson(QString::fromStdString(to_json(ExperimentConfig()))); });
  connect(import_action_, &QAction::triggered, this, &MainWindow::importExperiment);
  connect(export_action_, &QAction::triggered, this, &MainWindow::exportExperiment);
  connect(diff_action_, &QAction::triggered, this, &MainWindow::showConfigDiff);
  connect(save_action_, &QAction::triggered, this, [this] {
    if (!form_->name().isEmpty()) emit requestSave(form_->name(), form_->configJson());
  });
  connect(run_action_, &QAction::triggered, this, [this] {
    if (!form_->problems().isEmpty()) return;
    run_button_->setEnabled(false);  // until the worker answers
    run_action_->setEnabled(false);
    statusBar()->showMessage("Starting " + form_->name() + "…");
    emit requestStart(form_->configJson());
  });
  connect(kill_action_, &QAction::triggered, this, &MainWindow::killSelected);
  connect(resume_action_, &QAction::triggered, this, &MainWindow::resumeSelected);
  connect(new_sweep_action_, &QAction::triggered, this, &MainWindow::openSweepDesigner);
  connect(sweep_view_, &SweepView::newSweepRequested, this, &MainWindow::openSweepDesigner);
  connect(sweep_view_, &SweepView::compareRequested, this, &MainWindow::compareRuns);
  connect(clone_action_, &QAction::triggered, this, [this] { cloneRun(run_list_->selected()); });
  connect(refresh_action_, &QAction::triggered, this, &MainWindow::requestRefresh);
  connect(compare_action_, &QAction::triggered, this, [this] {
    if (run_list_->selectedRuns().size() >= 2) compareRuns(run_list_->selectedRuns());
  });

  // Each button is its action: the same command, the same shortcut in its tool tip.
  const std::pair<QPushButton*, QAction*> pairs[] = {
      {new_button_, new_action_},       {import_button_, import_action_},
      {export_button_, export_action_}, {save_button_, save_action_},
      {run_button_, run_action_},       {kill_button_, kill_action_},
      {resume_button_, resume_action_}, {compare_button_, compare_action_}};
  for (const auto& [button, a] : pairs) {
    connect(button, &QPushButton::clicked, a, &QAction::trigger);
    button->setToolTip(with_shortcut(a, QString(a->text()).remove('&').remove(QChar(0x2026))));
  }
}

void MainWindow::killSelected() {
  const QString run = run_list_->selected();
  if (run.isEmpty() || !is_live_state(run_list_->listedState(run)) || killing_.contains(run))
    return;
  const RunItem* item = run_list_->run(run);
  const QString nodes = item ? item->nodes : QString();
  const auto answer =
      QMessageBox::question(this, "Kill run",
                            "Kill run " + run + " on " + (nodes.isEmpty() ? "its nodes" : nodes) +
                                "? Its processes are stopped; what it recorded stays.",
                            QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
  if (answer != QMessageBox::Yes) return;
  // Until every node has confirmed, the run's state comes back "killed".
  killing_.insert(run);
  const QString state = item ? item->state : QString("running");
  const QString reason = item ? item->reason : QString();
  run_list_->showState(run, state, reason, true);
  statusBar()->showMessage("Killing " + run + "…");
  updateButtons();
  emit requestKill(run);
}

void MainWindow::resumeSelected() {
  const QString run = run_list_->selected();
  if (run.isEmpty() || !resume_refusal(run_list_->run(run)).isEmpty()) return;
  resume_action_->setEnabled(false);  // until its state comes back
  resume_button_->setEnabled(false);
  statusBar()->showMessage("Resuming " + run + " from its newest checkpoint…");
  emit requestResume(run);
}

bool MainWindow::cloneRun(const QString& run) {
  const RunItem* item = run_list_->run(run);
  if (!item) return false;
  auto document = nlohmann::json::parse(item->config_json.toStdString(), nullptr, false);
  if (!document.is_object()) {
    statusBar()->showMessage("Run " + run + " has no stored config to clone", 10000);
    return false;
  }
  const QString base = document.contains("name") && document["name"].is_string()
                           ? QString::fromStdString(document["name"].get<std::string>())
                           : item->experiment;
  auto taken = [this](const QString& name) {
    return std::any_of(experiments_.begin(), experiments_.end(),
                       [&](const ExperimentItem& e) { return e.name == name; });
  };
  QString name = base + "-clone";
  for (int n = 2; taken(name); ++n) name = base + "-clone-" + QString::number(n);
  document["name"] = name.toStdString();
  form_->setConfigJson(QString::fromStdString(document.dump()));
  tabs_->setCurrentIndex(0);
  statusBar()->showMessage(
      "Run " + run + "'s config is in the designer as " + name + ": Save keeps it, Run starts it.",
      15000);
  return true;
}

bool MainWindow::newFromPreset(const QString& file) {
  QFile in(file);
  if (!in.open(QIODevice::ReadOnly)) {
    QMessageBox::warning(this, "Flotilla", "Cannot read the preset " + file);
    return false;
  }
  form_->setConfigText(QString::fromUtf8(in.readAll()));
  tabs_->setCurrentIndex(0);
  statusBar()->showMessage("New experiment from " + QFileInfo(file).fileName(), 10000);
  return true;
}

QVector<ConfigSource> MainWindow::configSources() const {
  QVector<ConfigSource> sources;
  for (const auto& e : experiments_) sources.push_back({"experiment " + e.name, e.config_json});
  for (const auto& r : run_list_->runs())
    if (!r.config_json.isEmpty())
      sources.push_back({"run " + r.id + " (" + r.experiment + ")", r.config_json});
  return sources;
}

void MainWindow::showConfigDiff() {
  ConfigDiffDialog dialog(configSources(), this);
  dialog.exec();
}

void MainWindow::restoreSettings() {
  const QSettings settings(QSettings::IniFormat, QSettings::UserScope, kSettingsOrganisation,
                           kSettingsApplication);
  if (settings.contains("window/geometry"))
    restoreGeometry(settings.value("window/geometry").toByteArray());
  if (settings.contains("window/splitter"))
    splitter_->restoreState(settings.value("window/splitter").toByteArray());
  if (auto* designer_splitter = form_->findChild<QSplitter*>("designerSplitter");
      designer_splitter && settings.contains("designer/splitter"))
    designer_splitter->restoreState(settings.value("designer/splitter").toByteArray());
  const int tab = settings.value("window/tab", 0).toInt();
  if (tab >= 0 && tab < tabs_->count()) tabs_->setCurrentIndex(tab);
  if (settings.contains("runs/columns"))
    run_list_->restoreColumns(settings.value("runs/columns").toByteArray());
  if (settings.contains("nodes/columns"))
    nodes_view_->restoreColumns(settings.value("nodes/columns").toByteArray());
}

void MainWindow::saveSettings() const {
  QSettings settings(QSettings::IniFormat, QSettings::UserScope, kSettingsOrganisation,
                     kSettingsApplication);
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/splitter", splitter_->saveState());
  if (auto* designer_splitter = form_->findChild<QSplitter*>("designerSplitter"))
    settings.setValue("designer/splitter", designer_splitter->saveState());
  settings.setValue("window/tab", tabs_->currentIndex());
  // Widths fitted to what happened to be listed are not kept: the next
  // launch fits them to its own contents.
  if (run_list_->columnsChosen())
    settings.setValue("runs/columns", run_list_->table()->horizontalHeader()->saveState());
  else
    settings.remove("runs/columns");
  if (nodes_view_->columnsChosen())
    settings.setValue("nodes/columns", nodes_view_->table()->horizontalHeader()->saveState());
  else
    settings.remove("nodes/columns");
}

void MainWindow::connectWorker() {
  // Queued both ways: the worker lives on its own thread.
  connect(this, &MainWindow::requestRefresh, worker_, &ControllerWorker::refresh);
  connect(this, &MainWindow::requestSave, worker_, &ControllerWorker::saveExperiment);
  connect(this, &MainWindow::requestStart, worker_, &ControllerWorker::startRun);
  connect(this, &MainWindow::requestKill, worker_, &ControllerWorker::killRun);
  connect(this, &MainWindow::requestResume, worker_, &ControllerWorker::resumeRun);
  connect(sweep_view_, &SweepView::killRequested, worker_, &ControllerWorker::killSweep);
  connect(this, &MainWindow::requestAddNode, worker_, &ControllerWorker::addNode);
  connect(this, &MainWindow::requestUpdateNode, worker_, &ControllerWorker::updateNode);
  connect(this, &MainWindow::requestRemoveNode, worker_, &ControllerWorker::removeNode);
  connect(this, &MainWindow::requestProbe, worker_, &ControllerWorker::probeNodes);
  connect(this, &MainWindow::requestTrustAndProbe, worker_,
          &ControllerWorker::trustHostKeyAndProbe);
  connect(compare_view_, &CompareView::requestCompare, worker_, &ControllerWorker::compareRuns);
  connect(worker_, &ControllerWorker::compared, compare_view_, &CompareView::showTable);
  connect(worker_, &ControllerWorker::compareFailed, compare_view_, &CompareView::showFailure);
  connect(compare_view_, &CompareView::requestReport, worker_, &ControllerWorker::writeReport);
  connect(worker_, &ControllerWorker::reportWritten, compare_view_, &CompareView::reportWritten);
  connect(worker_, &ControllerWorker::reportFailed, compare_view_, &CompareView::reportFailed);
  connect(nodes_view_, &NodesView::requestAdd, this, &MainWindow::requestAddNode);
  connect(nodes_view_, &NodesView::requestUpdate, this, &MainWindow::requestUpdateNode);
  connect(nodes_view_, &NodesView::requestRemove, this, &MainWindow::requestRemoveNode);
  connect(nodes_view_, &NodesView::requestProbe, this, &MainWindow::requestProbe);
  connect(nodes_view_, &NodesView::requestTrustAndProbe, this, &MainWindow::requestTrustAndProbe);
  connect(worker_, &ControllerWorker::nodesChanged, nodes_view_, &NodesView::showNodes);
  connect(worker_, &ControllerWorker::nodesChanged, form_, &ExperimentDesigner::setNodes);
  connect(worker_, &ControllerWorker::linkBenchesChanged, form_,
          &ExperimentDesigner::setLinkBenches);
  connect(worker_, &ControllerWorker::nodeProfilesChanged, form_,
          &ExperimentDesigner::setNodeProfiles);
  connect(worker_, &ControllerWorker::nodeProbed, nodes_view_, &NodesView::nodeProbed);
  connect(worker_, &ControllerWorker::nodeProgress, nodes_view_, &NodesView::nodeProgress);
  connect(worker_, &ControllerWorker::nodeRefused, nodes_view_, &NodesView::showRefusal);
  connect(worker_, &ControllerWorker::opened, this,
          [this](const QString& db) { statusBar()->showMessage("Database " + db); });
  connect(worker_, &ControllerWorker::failed, this, [this](const QString& message) {
    statusBar()->showMessage(message.section('\n', 0, 0), 15000);
    updateButtons();
    if (message.contains('\n')) QMessageBox::warning(this, "Flotilla", message);
  });
  connect(worker_, &ControllerWorker::databaseRefusesWrites, this, [this](const QString& message) {
    database_status_->setText("Database refuses writes: records wait and are retried");
    database_status_->setToolTip(message);
    database_status_->show();
  });
  connect(worker_, &ControllerWorker::databaseTakesWrites, this, [this](const QString& message) {
    database_status_->hide();
    database_status_->setToolTip({});
    statusBar()->showMessage(message, 15000);
  });
  connect(worker_, &ControllerWorker::experimentsChanged, this, &MainWindow::showExperiments);
  connect(worker_, &ControllerWorker::runsChanged, this, &MainWindow::showRuns);
  connect(worker_, &ControllerWorker::runStateChanged, this, &MainWindow::updateRunState);
  connect(worker_, &ControllerWorker::hostKeyUnknown, this,
          [this](const QString& node, const QString& fingerprint, const QString& config_json) {
            const auto answer = QMessageBox::question(
                this, "Unknown host key",
                "Node " + node + " presents a host key this controller has not seen:\n\n" +
                    fingerprint +
                    "\n\nCompare it with the node's own (ssh-keygen -lf on its host key). "
                    "Trust it and start the run?",
                QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
            if (answer == QMessageBox::Yes)
              QMetaObject::invokeMethod(
                  worker_,
                  [worker = worker_, node, fingerprint, config_json] {
                    worker->trustHostKeyAndRun(node, fingerprint, config_json);
                  },
                  Qt::QueuedConnection);
          });
  connect(worker_, &ControllerWorker::runStarted, this, [this](const QString& run) {
    statusBar()->showMessage("Run " + run + " started", 5000);
    showRun(run);
    updateButtons();
  });
}

void MainWindow::showExperiments(const QVector<ExperimentItem>& experiments) {
  if (experiments == experiments_) return;  // the periodic refresh found nothing new
  const QString current =
      experiment_list_->currentItem() ? experiment_list_->currentItem()->text() : QString();
  experiments_ = experiments;
  QSignalBlocker block(experiment_list_);
  experiment_list_->clear();
  for (const auto& e : experiments) experiment_list_->addItem(e.name);
  for (int i = 0; i < experiment_list_->count(); ++i)
    if (experiment_list_->item(i)->text() == current) experiment_list_->setCurrentRow(i);
}

void MainWindow::showRuns(const QVector<RunItem>& runs) {
  if (runs == run_list_->runs()) return;  // the periodic refresh found nothing new
  const QString shown = dashboard_->runs().size() == 1 ? dashboard_->runs().front() : QString();
  const QString selected = run_list_->selected().isEmpty() ? shown : run_list_->selected();
  {
    const QSignalBlocker block(run_list_);
    run_list_->showRuns(runs, killing_);
    if (!selected.isEmpty()) run_list_->select(selected);
  }
  updateButtons();
}

void MainWindow::updateRunState(const QString& run, const QString& state, const QString& reason) {
  if (!is_live_state(state)) killing_.remove(run);
  const bool listed = run_list_->showState(run, state, reason, killing_.contains(run));
  if (!listed) emit requestRefresh();
  if (!is_live_state(state)) statusBar()->showMessage("Run " + run + " " + state, 10000);
  if (state == "starting" && dashboard_->runs().contains(run)) dashboard_->reload();
  updateButtons();
}

void MainWindow::showRun(const QString& run) {
  run_list_->select(run);
  dashboard_->showRun(run);
  tabs_->setCurrentWidget(dashboard_);
}

SweepDesigner* MainWindow::openSweepDesigner() {
  auto* designer = new SweepDesigner(this);
  designer->setAttribute(Qt::WA_DeleteOnClose);
  connect(designer, &SweepDesigner::planRequested, worker_, &ControllerWorker::planSweep);
  connect(worker_, &ControllerWorker::sweepPlanned, designer, &SweepDesigner::showPlan);
  connect(designer, &SweepDesigner::startRequested, worker_, &ControllerWorker::startSweep);
  connect(worker_, &ControllerWorker::sweepStarted, designer, &SweepDesigner::sweepStarted);
  connect(worker_, &ControllerWorker::sweepRefused, designer, &SweepDesigner::sweepRefused);
  connect(designer, &SweepDesigner::started, this, [this](const QString& sweep) {
    statusBar()->showMessage("Sweep " + sweep + " queued", 10000);
    tabs_->setCurrentWidget(sweep_view_);
    sweep_view_->selectSweep(sweep);
    sweep_view_->refresh();
  });
  designer->startFrom(form_->configJson());
  designer->show();
  return designer;
}

QStringList MainWindow::selectedRuns() const {
  return run_list_->selectedRuns();
}

void MainWindow::compareRuns(QStringList runs) {
  compare_view_->compare(runs);
  tabs_->setCurrentWidget(compare_view_);
}

QString MainWindow::listedState(const QString& run) const {
  return run_list_->listedState(run);
}

void MainWindow::updateButtons() {
  const bool runnable = form_->problems().isEmpty();
  run_action_->setEnabled(runnable);
  run_button_->setEnabled(runnable);
  const QString run_tip = with_shortcut(run_action_, "Run the experiment");
  run_button_->setToolTip(runnable ? run_tip
                                   : run_tip + "; not yet:\n" + form_->problems().join("\n"));
  const bool named = !form_->name().isEmpty();
  save_action_->setEnabled(named);
  save_button_->setEnabled(named);
  // Kill and clone act on one run; several selected are for comparing.
  const QStringList selected = run_list_->selectedRuns();
  const QString run = selected.size() == 1 ? selected.front() : QString();
  const bool killable =
      !run.isEmpty() && is_live_state(run_list_->listedState(run)) && !killing_.contains(run);
  kill_action_->setEnabled(killable);
  kill_button_->setEnabled(killable);
  const QString refusal = resume_refusal(run.isEmpty() ? nullptr : run_list_->run(run));
  resume_action_->setEnabled(refusal.isEmpty());
  resume_button_->setEnabled(refusal.isEmpty());
  resume_button_->setToolTip(
      refusal.isEmpty()
          ? "A new attempt of the run, from its newest checkpoint"
          : "A new attempt of the run, from its newest checkpoint; not now:\n" + refusal);
  clone_action_->setEnabled(!run.isEmpty());
  const bool comparable = selected.size() >= 2;
  compare_action_->setEnabled(comparable);
  compare_button_->setEnabled(comparable);
}

void MainWindow::importExperiment() {
  const QString file = QFileDialog::getOpenFileName(this, "Import experiment", {},
                                                    "Experiments (*.yaml *.yml *.json)");
  if (file.isEmpty()) return;
  try {
    const auto config = load_experiment(file.toStdString());
    form_->setConfigJson(QString::fromStdString(to_json(config)));
    emit requestSave(QString::fromStdString(config.name), QString::fromStdString(to_json(config)));
  } catch (const ConfigError& e) {
    QString text = file + " cannot be imported:";
    for (const auto& p : e.problems()) text += "\n" + QString::fromStdString(p);
    QMessageBox::warning(this, "Flotilla", text);
  }
}

void MainWindow::exportExperiment() {
  if (!form_->problems().isEmpty()) {
    QMessageBox::warning(this, "Flotilla",
                         "Fix the experiment first:\n" + form_->problems().join("\n"));
    return;
  }
  const QString file = QFileDialog::getSaveFileName(this, "Export experiment",
                                                    form_->name() + ".yaml", "YAML (*.yaml)");
  if (file.isEmpty()) return;
  std::ofstream out(file.toStdString());
  out << to_yaml(parse_experiment(form_->configJson().toStdString(), "form"));
  if (!out) QMessageBox::warning(this, "Flotilla", "Cannot write " + file);
}

}  // namespace flotilla::gui
