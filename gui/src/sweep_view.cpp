#include "sweep_view.h"

#include <QAction>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include <nlohmann/json.hpp>

#include "background_thread.h"
#include "flotilla/controller/store.h"
#include "flotilla/controller/sweep_store.h"
#include "flotilla/protocol/sweep.h"

namespace flotilla::gui {
namespace {

QString q(const std::string& text) {
  return QString::fromStdString(text);
}

QString first_line(const std::string& text) {
  return q(text.substr(0, text.find('\n')));
}

const QStringList kSweepColumns{"Sweep",  "State", "Points", "Done",    "Running",
                                "Queued", "OOM",   "Failed", "Skipped", "Refused"};

}  // namespace

QString point_values_text(const QString& values_json) {
  const auto values = nlohmann::ordered_json::parse(values_json.toStdString(), nullptr, false);
  if (!values.is_object()) return values_json;
  QString out;
  for (const auto& [key, value] : values.items())
    out += (out.isEmpty() ? "" : ", ") + q(key) + " " + q(value_text(value.dump()));
  return out;
}

SweepLoader::SweepLoader(QString database) : database_(std::move(database)) {}
SweepLoader::~SweepLoader() = default;

void SweepLoader::load() {
  try {
    if (!store_)
      store_ = std::make_unique<controller::Store>(database_, controller::StoreAccess::read_only);
    // Nothing committed since the last read: the table shows it already.
    const int64_t version = store_->data_version();
    if (read_version_ == version) return;
    controller::SweepStore sweeps(*store_);
    QVector<SweepItem> items;
    for (const auto& sweep : sweeps.sweeps()) {
      SweepItem item;
      item.name = q(sweep.name);
      item.state = q(std::string(name_of(sweep.state)));
      item.reason = first_line(sweep.reason);
      const auto points = sweeps.points(sweep.id);
      const auto p = controller::progress_of(points);
      item.total = p.total;
      item.finished = p.finished;
      item.running = p.running;
      item.queued = p.queued;
      item.oom = p.oom;
      item.failed = p.failed;
      item.killed = p.killed;
      item.skipped = p.skipped;
      item.refused = p.refused;
      for (const auto& point : points)
        item.points.push_back({point.index + 1, point_values_text(q(point.values_json)),
                               q(std::string(name_of(point.state))), q(point.run_id),
                               first_line(point.reason)});
      items.push_back(std::move(item));
    }
    read_version_ = version;
    emit loaded(items);
  } catch (const std::exception& e) {
    // A database without sweeps yet (or not there yet) is no failure to show twice.
    store_.reset();
    read_version_.reset();
    emit failed(q(e.what()));
  }
}

SweepView::SweepView(const QString& database, QWidget* parent)
    : QWidget(parent), loader_(new SweepLoader(database)), timer_(new QTimer(this)) {
  qRegisterMetaType<QVector<SweepItem>>();
  sweeps_ = new QTableWidget(0, kSweepColumns.size());
  sweeps_->setObjectName("sweepTable");
  sweeps_->setHorizontalHeaderLabels(kSweepColumns);
  points_ = new QTableWidget(0, 5);
  points_->setObjectName("sweepPointTable");
  points_->setHorizontalHeaderLabels({"#", "Values", "State", "Run", "Reason"});
  for (auto* table : {sweeps_, points_}) {
    table->setSelectionBehavior(QAbstractItemView::SelectRows);
    table->setSelectionMode(QAbstractItemView::SingleSelection);
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->verticalHeader()->hide();
    table->horizontalHeader()->setStretchLastSection(true);
  }
  // The name takes the room; the counts and a point's values, state and run
  // are as wide as their text; a point's reason takes the rest.
  sweeps_->horizontalHeader()->setStretchLastSection(false);
  sweeps_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  sweeps_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  points_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  points_->horizontalHeader()->setSectionResizeMode(4, QHeaderView::Stretch);
  kill_ = new QPushButton("Kill sweep");
  kill_->setObjectName("killSweepButton");
  kill_->setEnabled(false);
  compare_ = new QPushButton("Compare");
  compare_->setObjectName("compareSweepButton");
  compare_->setEnabled(false);
  new_sweep_ = new QPushButton("New sweep…");
  new_sweep_->setObjectName("newSweepButton");
  new_sweep_->setToolTip("Design a sweep over the experiment in the Experiment tab");
  // The same command on the sweep list's own menu (right click) and its shortcut.
  compare_action_ = new QAction("Compare the sweep's runs", this);
  compare_action_->setObjectName("actionCompareSweep");
  compare_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key_C));
  compare_action_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  compare_action_->setEnabled(false);
  addAction(compare_action_);
  sweeps_->setContextMenuPolicy(Qt::ActionsContextMenu);
  sweeps_->addAction(compare_action_);
  status_ = new QLabel("Reading the sweeps…");
  status_->setObjectName("sweepStatus");
  status_->setWordWrap(true);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(sweeps_, 1);
  auto* row = new QHBoxLayout;
  row->addWidget(status_, 1);
  row->addWidget(new_sweep_);
  row->addWidget(compare_);
  row->addWidget(kill_);
  layout->addLayout(row);
  layout->addWidget(points_, 2);

  loader_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, loader_, &QObject::deleteLater);
  connect(this, &SweepView::loadRequested, loader_, &SweepLoader::load);
  connect(loader_, &SweepLoader::loaded, this, &SweepView::showSweeps);
  connect(loader_, &SweepLoader::failed, this, [this](const QString& message) {
    status_->setText("Cannot read the sweeps: " + message);
  });
  connect(sweeps_, &QTableWidget::itemSelectionChanged, this, &SweepView::showPoints);
  connect(kill_, &QPushButton::clicked, this, [this] {
    const auto sweep = selectedSweep();
    if (sweep.isEmpty()) return;
    const auto answer =
        QMessageBox::question(this, "Kill sweep",
                              "Kill sweep " + sweep +
                                  "? Its live run is killed and its queued points are skipped; "
                                  "what ran stays.",
                              QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
    if (answer == QMessageBox::Yes) emit killRequested(sweep);
  });
  connect(compare_, &QPushButton::clicked, compare_action_, &QAction::trigger);
  connect(compare_action_, &QAction::triggered, this, [this] {
    const auto runs = comparableRuns();
    if (runs.size() >= 2) emit compareRequested(runs);
  });
  connect(new_sweep_, &QPushButton::clicked, this, &SweepView::newSweepRequested);
  // A tab that is not shown reads nothing; it reads at once when shown.
  connect(timer_, &QTimer::timeout, this, [this] {
    if (isVisible() || !window()->isVisible()) refresh();
  });
  start_below_the_window(thread_, "sweeps load");
  timer_->start(2000);
  refresh();
}

SweepView::~SweepView() {
  thread_.quit();
  thread_.wait();
}

void SweepView::refresh() {
  emit loadRequested();
}

void SweepView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  refresh();
}

void SweepView::selectSweep(const QString& name) {
  to_select_ = name;
  for (int r = 0; r < sweeps_->rowCount(); ++r)
    if (sweeps_->item(r, 0) && sweeps_->item(r, 0)->text() == name) {
      sweeps_->selectRow(r);
      to_select_.clear();
    }
}

QStringList SweepView::comparableRuns() const {
  const auto name = selectedSweep();
  QStringList runs;
  for (const auto& s : shown_)
    if (s.name == name)
      for (const auto& p : s.points)
        if (!p.run.isEmpty() && (p.state == "finished" || p.state == "oom")) runs << p.run;
  return runs;
}

QString SweepView::selectedSweep() const {
  const auto rows = sweeps_->selectionModel()->selectedRows();
  if (rows.isEmpty()) return {};
  return sweeps_->item(rows.front().row(), 0)->text();
}

void SweepView::showSweeps(const QVector<SweepItem>& sweeps) {
  const auto selected = selectedSweep();
  shown_ = sweeps;
  sweeps_->setRowCount(sweeps.size());
  for (int r = 0; r < sweeps.size(); ++r) {
    const auto& s = sweeps[r];
    const QStringList cells{s.name,
                            s.state + (s.reason.isEmpty() ? "" : " (" + s.reason + ")"),
                            QString::number(s.total),
                            QString::number(s.finished + s.oom + s.failed + s.killed),
                            QString::number(s.running),
                            QString::number(s.queued),
                            QString::number(s.oom),
                            QString::number(s.failed),
                            QString::number(s.skipped),
                            QString::number(s.refused)};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = sweeps_->item(r, c);
      if (!item) sweeps_->setItem(r, c, item = new QTableWidgetItem);
      item->setText(cells[c]);
      item->setTextAlignment(c >= 2 ? (Qt::AlignRight | Qt::AlignVCenter)
                                    : (Qt::AlignLeft | Qt::AlignVCenter));
    }
  }
  for (int r = 0; r < sweeps.size(); ++r)
    if (sweeps[r].name == selected) sweeps_->selectRow(r);
  if (!to_select_.isEmpty()) selectSweep(to_select_);
  if (sweeps.isEmpty())
    status_->setText(
        "No sweep yet: New sweep… designs one; `flotilla sweep FILE` or `flotilla study run` "
        "starts one.");
  else if (selectedSweep().isEmpty())
    status_->setText("Select a sweep to see its points.");
  showPoints();
}

void SweepView::showPoints() {
  const auto name = selectedSweep();
  const SweepItem* sweep = nullptr;
  for (const auto& s : shown_)
    if (s.name == name) sweep = &s;
  kill_->setEnabled(sweep && sweep->state == "running");
  const int comparable = comparableRuns().size();
  compare_->setEnabled(comparable >= 2);
  compare_action_->setEnabled(comparable >= 2);
  const QString compare_tip =
      "Open the Compare tab on the runs of the selected sweep that "
      "finished or ran out of memory (" +
      compare_action_->shortcut().toString(QKeySequence::NativeText) + ")";
  compare_->setToolTip(!sweep || comparable >= 2
                           ? compare_tip
                           : compare_tip + "; not yet: " + QString::number(comparable) +
                                 " such run(s), Compare needs two");
  points_->setRowCount(sweep ? sweep->points.size() : 0);
  if (!sweep) return;
  status_->setText(QString("%1: %2 of %3 point(s) done, %4 running, %5 queued")
                       .arg(sweep->name)
                       .arg(sweep->finished + sweep->oom + sweep->failed + sweep->killed)
                       .arg(sweep->total)
                       .arg(sweep->running)
                       .arg(sweep->queued));
  for (int r = 0; r < sweep->points.size(); ++r) {
    const auto& p = sweep->points[r];
    const QStringList cells{QString::number(p.index), p.values, p.state, p.run, p.reason};
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = points_->item(r, c);
      if (!item) points_->setItem(r, c, item = new QTableWidgetItem);
      item->setText(cells[c]);
    }
  }
}

}  // namespace flotilla::gui
