#include "main_window.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QListWidget>
#include <QMessageBox>
#include <QPushButton>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <fstream>
#include <sstream>

#include "dashboard.h"
#include "experiment_designer.h"
#include "flotilla/protocol/experiment_config.h"
#include "nodes_view.h"
#include "sweep_view.h"

namespace flotilla::gui {
namespace {
enum RunColumn { kRunId, kRunState, kRunExperiment, kRunRanks, kRunReason, kRunColumns };
bool live(const QString& state) {
  return state == "created" || state == "starting" || state == "running";
}
}  // namespace

MainWindow::MainWindow(const QString& database, const std::filesystem::path& agent_binary,
                       QWidget* parent, bool view_only)
    : QMainWindow(parent), worker_(new ControllerWorker(database, agent_binary, view_only)) {
  setWindowTitle("Flotilla — " + database);
  dashboard_ = new Dashboard(database);
  sweep_view_ = new SweepView(database);
  sweep_view_->setObjectName("sweepView");
  buildWidgets();
  worker_->moveToThread(&worker_thread_);
  connect(&worker_thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connectWorker();
  worker_thread_.start();
  QMetaObject::invokeMethod(worker_, &ControllerWorker::open, Qt::QueuedConnection);
  // Runs started elsewhere (the CLI) show up too.
  auto* poll = new QTimer(this);
  connect(poll, &QTimer::timeout, this, &MainWindow::requestRefresh);
  poll->start(3000);
}

MainWindow::~MainWindow() {
  worker_thread_.quit();
  worker_thread_.wait();
}

void MainWindow::buildWidgets() {
  experiment_list_ = new QListWidget;
  experiment_list_->setObjectName("experimentList");
  run_table_ = new QTableWidget(0, kRunColumns);
  run_table_->setObjectName("runTable");
  run_table_->setHorizontalHeaderLabels({"Run", "State", "Experiment", "Ranks", "Reason"});
  run_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  run_table_->setSelectionMode(QAbstractItemView::SingleSelection);
  run_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  run_table_->verticalHeader()->hide();
  // Run ids, states and rank counts are short: sized to their contents, the
  // Reason gets the rest, elided at its end, with its whole text in the tooltip.
  run_table_->horizontalHeader()->setStretchLastSection(true);
  for (const int column : {kRunId, kRunState, kRunRanks})
    run_table_->horizontalHeader()->setSectionResizeMode(column, QHeaderView::ResizeToContents);
  run_table_->setTextElideMode(Qt::ElideRight);
  run_table_->setWordWrap(false);

  auto* new_button = new QPushButton("New");
  auto* import_button = new QPushButton("Import…");
  auto* export_button = new QPushButton("Export…");
  save_button_ = new QPushButton("Save");
  save_button_->setObjectName("saveButton");
  run_button_ = new QPushButton("Run");
  run_button_->setObjectName("runButton");
  kill_button_ = new QPushButton("Kill");
  kill_button_->setObjectName("killButton");

  auto* left = new QWidget;
  auto* left_layout = new QVBoxLayout(left);
  auto* experiment_buttons = new QHBoxLayout;
  for (auto* b : {new_button, import_button, export_button}) experiment_buttons->addWidget(b);
  left_layout->addWidget(experiment_list_, 1);
  left_layout->addLayout(experiment_buttons);
  left_layout->addWidget(run_table_, 2);

  // Right: the designer with its buttons, the selected run's dashboard, the nodes.
  form_ = new ExperimentDesigner;
  nodes_view_ = new NodesView;
  nodes_view_->setObjectName("nodesView");
  auto* experiment = new QWidget;
  auto* experiment_layout = new QHBoxLayout(experiment);
  experiment_layout->addWidget(form_, 1);
  auto* run_buttons = new QVBoxLayout;
  for (auto* b : {save_button_, run_button_, kill_button_}) run_buttons->addWidget(b);
  run_buttons->addStretch();
  experiment_layout->addLayout(run_buttons);
  tabs_ = new QTabWidget;
  tabs_->setObjectName("mainTabs");
  tabs_->addTab(experiment, "Experiment");
  tabs_->addTab(dashboard_, "Dashboard");
  tabs_->addTab(nodes_view_, "Nodes");
  tabs_->addTab(sweep_view_, "Sweeps");

  auto* splitter = new QSplitter;
  splitter->addWidget(left);
  splitter->addWidget(tabs_);
  splitter->setStretchFactor(1, 3);
  setCentralWidget(splitter);
  resize(1500, 950);
  splitter->setSizes({420, 1080});

  connect(new_button, &QPushButton::clicked, this,
          [this] { form_->setConfigJson(QString::fromStdString(to_json(ExperimentConfig()))); });
  connect(import_button, &QPushButton::clicked, this, &MainWindow::importExperiment);
  connect(export_button, &QPushButton::clicked, this, &MainWindow::exportExperiment);
  connect(experiment_list_, &QListWidget::currentRowChanged, this, [this](int row) {
    if (row < 0 || row >= experiments_.size()) return;
    form_->setConfigJson(experiments_[row].config_json);
    tabs_->setCurrentIndex(0);
  });
  connect(run_table_, &QTableWidget::itemSelectionChanged, this, [this] {
    const QString run = selectedRun();
    if (!run.isEmpty()) {
      dashboard_->showRun(run);
      tabs_->setCurrentWidget(dashboard_);
    }
    updateButtons();
  });
  connect(form_, &ExperimentDesigner::edited, this, &MainWindow::updateButtons);
  connect(save_button_, &QPushButton::clicked, this,
          [this] { emit requestSave(form_->name(), form_->configJson()); });
  connect(run_button_, &QPushButton::clicked, this, [this] {
    run_button_->setEnabled(false);  // until the worker answers
    statusBar()->showMessage("Starting " + form_->name() + "…");
    emit requestStart(form_->configJson());
  });
  connect(kill_button_, &QPushButton::clicked, this, [this] {
    const QString run = selectedRun();
    if (run.isEmpty()) return;
    QString nodes;
    for (const auto& r : runs_)
      if (r.id == run) nodes = r.nodes;
    const auto answer =
        QMessageBox::question(this, "Kill run",
                              "Kill run " + run + " on " + (nodes.isEmpty() ? "its nodes" : nodes) +
                                  "? Its processes are stopped; what it recorded stays.",
                              QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
    if (answer != QMessageBox::Yes) return;
    // Until every node has confirmed, the run's state comes back "killed".
    killing_.insert(run);
    for (int row = 0; row < run_table_->rowCount(); ++row)
      if (run_table_->item(row, kRunId)->text() == run)
        run_table_->item(row, kRunState)->setText("killing…");
    statusBar()->showMessage("Killing " + run + "…");
    updateButtons();
    emit requestKill(run);
  });
  updateButtons();
}

void MainWindow::connectWorker() {
  // Queued both ways: the worker lives on its own thread.
  connect(this, &MainWindow::requestRefresh, worker_, &ControllerWorker::refresh);
  connect(this, &MainWindow::requestSave, worker_, &ControllerWorker::saveExperiment);
  connect(this, &MainWindow::requestStart, worker_, &ControllerWorker::startRun);
  connect(this, &MainWindow::requestKill, worker_, &ControllerWorker::killRun);
  connect(sweep_view_, &SweepView::killRequested, worker_, &ControllerWorker::killSweep);
  connect(this, &MainWindow::requestAddNode, worker_, &ControllerWorker::addNode);
  connect(this, &MainWindow::requestUpdateNode, worker_, &ControllerWorker::updateNode);
  connect(this, &MainWindow::requestRemoveNode, worker_, &ControllerWorker::removeNode);
  connect(this, &MainWindow::requestProbe, worker_, &ControllerWorker::probeNodes);
  connect(this, &MainWindow::requestTrustAndProbe, worker_,
          &ControllerWorker::trustHostKeyAndProbe);
  connect(nodes_view_, &NodesView::requestAdd, this, &MainWindow::requestAddNode);
  connect(nodes_view_, &NodesView::requestUpdate, this, &MainWindow::requestUpdateNode);
  connect(nodes_view_, &NodesView::requestRemove, this, &MainWindow::requestRemoveNode);
  connect(nodes_view_, &NodesView::requestProbe, this, &MainWindow::requestProbe);
  connect(nodes_view_, &NodesView::requestTrustAndProbe, this, &MainWindow::requestTrustAndProbe);
  connect(worker_, &ControllerWorker::nodesChanged, nodes_view_, &NodesView::showNodes);
  connect(worker_, &ControllerWorker::nodesChanged, form_, &ExperimentDesigner::setNodes);
  connect(worker_, &ControllerWorker::nodeProbed, nodes_view_, &NodesView::nodeProbed);
  connect(worker_, &ControllerWorker::nodeRefused, nodes_view_, &NodesView::showRefusal);
  connect(worker_, &ControllerWorker::opened, this,
          [this](const QString& db) { statusBar()->showMessage("Database " + db); });
  connect(worker_, &ControllerWorker::failed, this, [this](const QString& message) {
    statusBar()->showMessage(message.section('\n', 0, 0), 15000);
    run_button_->setEnabled(form_->problems().isEmpty());
    if (message.contains('\n')) QMessageBox::warning(this, "Flotilla", message);
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
                  [worker = worker_, node, config_json] {
                    worker->trustHostKeyAndRun(node, config_json);
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
  if (runs == runs_) return;  // the periodic refresh found nothing new
  runs_ = runs;
  const QString shown = dashboard_->runs().size() == 1 ? dashboard_->runs().front() : QString();
  const QString selected = selectedRun().isEmpty() ? shown : selectedRun();
  QSignalBlocker block(run_table_);
  run_table_->setRowCount(int(runs.size()));
  for (int row = 0; row < runs.size(); ++row) {
    // Newest first.
    const auto& r = runs[runs.size() - 1 - row];
    const QStringList cells{r.id, r.state, r.experiment, QString::number(r.world_size),
                            r.reason.section('\n', 0, 0)};
    for (int column = 0; column < kRunColumns; ++column) {
      auto* item = new QTableWidgetItem(cells[column]);
      item->setToolTip(column == kRunReason ? r.reason : cells[column]);
      run_table_->setItem(row, column, item);
    }
  }
  for (const auto& run : killing_) showKilling(run);
  run_table_->resizeColumnsToContents();
  if (!selected.isEmpty()) selectRun(selected);
  updateButtons();
}

void MainWindow::updateRunState(const QString& run, const QString& state, const QString& reason) {
  bool listed = false;
  for (int row = 0; row < run_table_->rowCount(); ++row) {
    if (run_table_->item(row, kRunId)->text() != run) continue;
    run_table_->item(row, kRunState)->setText(state);
    run_table_->item(row, kRunReason)->setText(reason.section('\n', 0, 0));
    run_table_->item(row, kRunReason)->setToolTip(reason);
    listed = true;
  }
  for (auto& item : runs_)
    if (item.id == run) item.state = state, item.reason = reason;
  if (!live(state)) killing_.remove(run);
  if (killing_.contains(run)) showKilling(run);
  if (!listed) emit requestRefresh();
  if (!live(state)) statusBar()->showMessage("Run " + run + " " + state, 10000);
  updateButtons();
}

void MainWindow::showRun(const QString& run) {
  selectRun(run);
  dashboard_->showRun(run);
  tabs_->setCurrentWidget(dashboard_);
}

void MainWindow::selectRun(const QString& run) {
  for (int row = 0; row < run_table_->rowCount(); ++row)
    if (run_table_->item(row, kRunId)->text() == run) {
      run_table_->selectRow(row);
      return;
    }
}

QString MainWindow::selectedRun() const {
  const auto rows = run_table_->selectionModel()->selectedRows();
  return rows.isEmpty() ? QString() : run_table_->item(rows.front().row(), kRunId)->text();
}

void MainWindow::showKilling(const QString& run) {
  for (int row = 0; row < run_table_->rowCount(); ++row)
    if (run_table_->item(row, kRunId)->text() == run)
      run_table_->item(row, kRunState)->setText("killing…");
}

QString MainWindow::listedState(const QString& run) const {
  for (int row = 0; row < run_table_->rowCount(); ++row)
    if (run_table_->item(row, kRunId)->text() == run)
      return run_table_->item(row, kRunState)->text();
  return {};
}

void MainWindow::updateButtons() {
  run_button_->setEnabled(form_->problems().isEmpty());
  run_button_->setToolTip(form_->problems().join("\n"));
  save_button_->setEnabled(!form_->name().isEmpty());
  const QString run = selectedRun();
  kill_button_->setEnabled(!run.isEmpty() && live(listedState(run)) && !killing_.contains(run));
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
