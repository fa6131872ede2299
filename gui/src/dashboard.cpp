#include "dashboard.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QScrollArea>
#include <QSlider>
#include <QTabWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

#include "background_thread.h"
#include "run_details.h"

namespace flotilla::gui {

using charts::PanelKind;

Dashboard::Dashboard(const QString& database, QWidget* parent)
    : QWidget(parent),
      loader_(new DashboardLoader(database)),
      sync_(new charts::PanelSync(this)),
      pace_(new QTimer(this)) {
  setObjectName("dashboard");
  pace_->setSingleShot(true);
  connect(pace_, &QTimer::timeout, this, &Dashboard::takeFrame);
  auto* bar = new QWidget;
  buildControls(bar);
  auto* grid_holder = new QWidget;
  auto* grid = new QGridLayout(grid_holder);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(6);
  int cell = 0;
  for (const auto kind : charts::kAllPanels) {
    auto* panel = new charts::PanelWidget(sync_);
    panel->setObjectName(
        QString("panel_") +
        QString::fromLatin1(charts::name_of(kind).data(), int(charts::name_of(kind).size())));
    panel->setMinimumHeight(330);
    panels_[kind] = panel;
    grid->addWidget(panel, cell / 2, cell % 2);
    ++cell;
  }
  auto* scroll = new QScrollArea;
  scroll->setWidget(grid_holder);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* charts_tab = new QWidget;
  auto* charts_layout = new QVBoxLayout(charts_tab);
  charts_layout->setContentsMargins(0, 0, 0, 0);
  charts_layout->addWidget(bar);
  charts_layout->addWidget(scroll, 1);
  details_ = new RunDetails;
  tabs_ = new QTabWidget;
  tabs_->setObjectName("dashboardTabs");
  tabs_->addTab(charts_tab, "Charts");
  tabs_->addTab(details_, "Details");
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(tabs_);

  loader_->moveToThread(&loader_thread_);
  connect(&loader_thread_, &QThread::finished, loader_, &QObject::deleteLater);
  connect(this, &Dashboard::requestShow, loader_, &DashboardLoader::show);
  connect(this, &Dashboard::requestOptions, loader_, &DashboardLoader::setOptions);
  connect(loader_, &DashboardLoader::frameReady, this, &Dashboard::receive);
  connect(loader_, &DashboardLoader::loadCancelled, this, &Dashboard::loadCancelled);
  connect(loader_, &DashboardLoader::failed, this, [this](const QString& message, quint64 g) {
    if (g != generation_) return;
    error_ = message;
    updateStatus();
  });
  start_below_the_window(loader_thread_, "dashboard load");
  details_->showNothing("No run selected: pick one in the run list.");
  updateStatus();
}

Dashboard::~Dashboard() {
  // A load in progress stops at its next page.
  loader_->supersede(++generation_, true);
  loader_thread_.quit();
  loader_thread_.wait();
}

void Dashboard::buildControls(QWidget* bar) {
  x_combo_ = new QComboBox;
  x_combo_->setObjectName("xModeCombo");
  x_combo_->addItem("step", int(charts::XMode::step));
  x_combo_->addItem("wall clock", int(charts::XMode::wall_time));
  x_combo_->addItem("relative time", int(charts::XMode::relative_time));
  x_combo_->setToolTip("x axis of every panel; relative time counts from each node's start");
  smoothing_slider_ = new QSlider(Qt::Horizontal);
  smoothing_slider_->setObjectName("smoothingSlider");
  smoothing_slider_->setRange(0, 99);
  smoothing_slider_->setFixedWidth(120);
  smoothing_spin_ = new QDoubleSpinBox;
  smoothing_spin_->setObjectName("smoothingSpin");
  smoothing_spin_->setRange(0, 0.99);
  smoothing_spin_->setSingleStep(0.05);
  smoothing_spin_->setDecimals(2);
  smoothing_spin_->setToolTip(
      "TensorBoard's debiased exponential moving average; the raw values stay faint behind");
  // Per-step values of small batches are a band of noise: smoothed by
  // default, the raw values one click away.
  smoothing_spin_->setValue(kDefaultSmoothing);
  smoothing_slider_->setValue(int(std::lround(kDefaultSmoothing * 100)));
  raw_button_ = new QToolButton;
  raw_button_->setObjectName("rawButton");
  raw_button_->setText("raw");
  raw_button_->setCheckable(true);
  raw_button_->setToolTip("Every panel's raw values, unsmoothed (again: smoothed as before)");
  ranks_button_ = new QToolButton;
  ranks_button_->setObjectName("ranksButton");
  ranks_button_->setText("ranks: all");
  ranks_button_->setPopupMode(QToolButton::InstantPopup);
  ranks_button_->setMenu(new QMenu(ranks_button_));
  nodes_button_ = new QToolButton;
  nodes_button_->setObjectName("nodesButton");
  nodes_button_->setText("nodes: all");
  nodes_button_->setPopupMode(QToolButton::InstantPopup);
  nodes_button_->setMenu(new QMenu(nodes_button_));
  breakdown_combo_ = new QComboBox;
  breakdown_combo_->setObjectName("breakdownCombo");
  breakdown_combo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  breakdown_combo_->setToolTip("The rank whose step the Step time panel breaks down");
  status_ = new QLabel;
  status_->setObjectName("dashboardStatus");
  status_->setWordWrap(true);

  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(4, 4, 4, 2);
  row->addWidget(new QLabel("x:"));
  row->addWidget(x_combo_);
  row->addSpacing(8);
  row->addWidget(new QLabel("smoothing:"));
  row->addWidget(smoothing_slider_);
  row->addWidget(smoothing_spin_);
  row->addWidget(raw_button_);
  row->addSpacing(8);
  row->addWidget(ranks_button_);
  row->addWidget(nodes_button_);
  row->addWidget(new QLabel("breakdown:"));
  row->addWidget(breakdown_combo_);
  row->addSpacing(8);
  row->addWidget(status_, 1);

  connect(x_combo_, &QComboBox::currentIndexChanged, this, &Dashboard::optionsChanged);
  connect(smoothing_slider_, &QSlider::valueChanged, this, [this](int v) {
    QSignalBlocker block(smoothing_spin_);
    smoothing_spin_->setValue(v / 100.0);
    optionsChanged();
  });
  connect(smoothing_spin_, &QDoubleSpinBox::valueChanged, this, [this](double v) {
    QSignalBlocker block(smoothing_slider_);
    smoothing_slider_->setValue(int(std::lround(v * 100)));
    QSignalBlocker raw(raw_button_);
    raw_button_->setChecked(v == 0);
    optionsChanged();
  });
  connect(raw_button_, &QToolButton::toggled, this, [this](bool raw) {
    if (raw) {
      smoothed_weight_ = smoothing_spin_->value() > 0 ? smoothing_spin_->value() : smoothed_weight_;
      setSmoothing(0);
    } else {
      setSmoothing(smoothed_weight_);
    }
  });
  connect(breakdown_combo_, &QComboBox::activated, this, [this](int index) {
    const QVariant rank = breakdown_combo_->itemData(index);
    breakdown_rank_ = rank.isValid() ? std::optional<int64_t>(rank.toLongLong()) : std::nullopt;
    optionsChanged();
  });
}

charts::PanelOptions Dashboard::options() const {
  charts::PanelOptions o;
  o.x = charts::XMode(x_combo_->currentData().toInt());
  o.smoothing = smoothing_spin_->value();
  o.ranks = shown_ranks_;
  o.nodes = shown_nodes_;
  o.breakdown_rank = breakdown_rank_;
  return o;
}

void Dashboard::setXMode(charts::XMode mode) {
  x_combo_->setCurrentIndex(x_combo_->findData(int(mode)));
}

void Dashboard::setSmoothing(double weight) {
  smoothing_spin_->setValue(weight);
}

void Dashboard::setShownRanks(const std::optional<std::set<int64_t>>& ranks) {
  shown_ranks_ = ranks;
  ranks_button_->setText(ranks ? QString("ranks: %1 shown").arg(ranks->size()) : "ranks: all");
  optionsChanged();
}

void Dashboard::setShownNodes(const std::optional<std::set<std::string>>& nodes) {
  shown_nodes_ = nodes;
  nodes_button_->setText(nodes ? QString("nodes: %1 shown").arg(nodes->size()) : "nodes: all");
  optionsChanged();
}

void Dashboard::setBreakdownRank(std::optional<int64_t> rank) {
  breakdown_rank_ = rank;
  optionsChanged();
}

void Dashboard::showRuns(const QStringList& runs) {
  if (runs == runs_ && frame_) return;
  runs_ = runs;
  frame_.reset();
  pending_.reset();
  latest_.reset();
  error_.clear();
  // Filters belong to a run; zoom too.
  shown_ranks_.reset();
  shown_nodes_.reset();
  breakdown_rank_.reset();
  ranks_button_->setText("ranks: all");
  nodes_button_->setText("nodes: all");
  sync_->resetZoom();
  loader_->supersede(++generation_, true);
  emit requestShow(runs, options(), generation_);
  updateStatus();
}

void Dashboard::reload() {
  if (runs_.isEmpty()) return;
  const QStringList runs = runs_;
  frame_.reset();
  showRuns(runs);
}

void Dashboard::optionsChanged() {
  if (runs_.isEmpty()) return;
  loader_->supersede(++generation_, false);
  emit requestOptions(options(), generation_);
}

void Dashboard::receive(std::shared_ptr<const DashboardFrame> frame) {
  // A frame of other runs, or of options changed since, is not drawn; the
  // loader may build the next one.
  if (frame->runs != runs_ || frame->generation < generation_) {
    loader_->frameTaken();
    return;
  }
  error_.clear();
  latest_ = std::move(frame);
  scheduleFrame();
}

bool Dashboard::outOfSight() const {
  // A dashboard that is not in a shown window at all (a bench, a test, an
  // export) draws; one on a tab of a shown window that is not current waits.
  return !isVisible() && window()->isVisible();
}

void Dashboard::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  scheduleFrame();
}

void Dashboard::scheduleFrame() {
  if (!latest_ || pending_ || pace_->isActive() || outOfSight()) return;
  // The first frame of a run at once; later ones at most kFramesPerSecond.
  const qint64 since = last_take_.isValid() ? last_take_.elapsed() : 1000;
  const int interval = 1000 / kFramesPerSecond;
  pace_->start(onScreen() ? int(std::max<qint64>(0, interval - since)) : 0);
}

void Dashboard::takeFrame() {
  if (!latest_ || pending_) return;
  if (outOfSight()) return;  // taken when shown
  pending_ = std::move(latest_);
  last_take_.start();
  next_panel_ = 0;
  // The loader reads what came meanwhile and builds the next frame while
  // this one is drawn.
  loader_->frameTaken();
  updateFilters(*pending_);
  if (!pending_->facts.empty()) details_->showFacts(pending_->facts.front());
  // The status line says what the panels draw: it follows a frame from its
  // first panel on.
  updateStatus();
  drawNextPanel();
}

void Dashboard::drawNextPanel() {
  if (!pending_) return;
  const auto kinds = std::size(charts::kAllPanels);
  if (next_panel_ < kinds) {
    const auto kind = charts::kAllPanels[next_panel_++];
    auto* panel = panels_.at(kind);
    QElapsedTimer clock;
    clock.start();
    panel->setPanel(pending_->panels.at(kind));
    const qint64 set_ns = clock.nsecsElapsed();
    // One panel a turn, painted in its turn: input gets its turn between
    // panels (left to Qt, the seven panels were painted in one 100-300 ms
    // go), and the frame is drawn to its last panel before another is taken.
    panel->paintNow();
    auto& cost = draw_costs_[kind];
    const double set_ms = double(set_ns) / 1e6,
                 paint_ms = double(clock.nsecsElapsed() - set_ns) / 1e6;
    ++cost.panels;
    cost.set_total_ms += set_ms;
    cost.set_max_ms = std::max(cost.set_max_ms, set_ms);
    cost.paint_total_ms += paint_ms;
    cost.paint_max_ms = std::max(cost.paint_max_ms, paint_ms);
    QTimer::singleShot(0, this, &Dashboard::drawNextPanel);
    return;
  }
  frame_ = std::move(pending_);
  ++frames_drawn_;
  updateStatus();
  emit frameDrawn();
  scheduleFrame();
}

void Dashboard::updateFilters(const DashboardFrame& frame) {
  auto* ranks = ranks_button_->menu();
  QStringList have;
  for (auto* action : ranks->actions()) have << action->text();
  QStringList want{"all ranks"};
  for (const auto rank : frame.ranks) want << "rank " + QString::number(rank);
  if (have != want) {
    ranks->clear();
    ranks->addAction("all ranks", this, [this] { setShownRanks(std::nullopt); });
    for (const auto rank : frame.ranks) {
      auto* action = ranks->addAction("rank " + QString::number(rank));
      action->setCheckable(true);
      action->setChecked(!shown_ranks_ || shown_ranks_->count(rank));
      connect(action, &QAction::toggled, this, [this, rank, all = frame.ranks](bool on) {
        std::set<int64_t> shown = shown_ranks_.value_or(std::set<int64_t>(all.begin(), all.end()));
        if (on)
          shown.insert(rank);
        else
          shown.erase(rank);
        setShownRanks(shown.size() == all.size() ? std::nullopt : std::optional(shown));
      });
    }
  }
  auto* nodes = nodes_button_->menu();
  if (nodes->actions().size() != qsizetype(frame.nodes.size()) + 1) {
    nodes->clear();
    nodes->addAction("all nodes", this, [this] { setShownNodes(std::nullopt); });
    for (const auto& node : frame.nodes) {
      auto* action = nodes->addAction(QString::fromStdString(node));
      action->setCheckable(true);
      action->setChecked(true);
      connect(action, &QAction::toggled, this, [this, node, all = frame.nodes](bool on) {
        std::set<std::string> shown =
            shown_nodes_.value_or(std::set<std::string>(all.begin(), all.end()));
        if (on)
          shown.insert(node);
        else
          shown.erase(node);
        setShownNodes(shown.size() == all.size() ? std::nullopt : std::optional(shown));
      });
    }
  }
  QSignalBlocker block(breakdown_combo_);
  if (breakdown_combo_->count() != qsizetype(frame.ranks.size()) + 1) {
    breakdown_combo_->clear();
    breakdown_combo_->addItem("lead rank");
    for (const auto rank : frame.ranks)
      breakdown_combo_->addItem("rank " + QString::number(rank),
                                QVariant::fromValue<qlonglong>(rank));
  }
  ranks_button_->setEnabled(frame.runs.size() == 1);
  breakdown_combo_->setEnabled(frame.runs.size() == 1);
}

void Dashboard::updateStatus() {
  QString text;
  const DashboardFrame* shown = onScreen();
  if (!error_.isEmpty())
    text = error_;
  else if (runs_.isEmpty())
    text = "No run selected.";
  else if (!shown)
    text = "Loading " + runs_.join(", ") + "…";
  else if (shown->coarse)
    text = QString("%1 step records: drawn from buckets, every step loading…")
               .arg(shown->step_records);
  else
    text = QString("%1 step records%2").arg(shown->step_records).arg(shown->live ? ", live" : "");
  status_->setText(text);
  status_->setStyleSheet(error_.isEmpty() ? "" : "color: #b03a2e;");
}

}  // namespace flotilla::gui
