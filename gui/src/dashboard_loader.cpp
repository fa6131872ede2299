#include "dashboard_loader.h"

#include <QElapsedTimer>

#include <chrono>

#include "flotilla/charts/run_loader.h"
#include "flotilla/controller/store.h"

namespace flotilla::gui {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

DashboardLoader::DashboardLoader(QString database) : database_(std::move(database)) {
  qRegisterMetaType<charts::PanelOptions>();
  qRegisterMetaType<std::shared_ptr<const DashboardFrame>>();
}

DashboardLoader::~DashboardLoader() = default;

bool DashboardLoader::openStore() {
  if (store_) return true;
  try {
    store_ = std::make_unique<controller::Store>(database_, controller::StoreAccess::read_only);
    return true;
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()), generation_);
    return false;
  }
}

void DashboardLoader::show(const QStringList& runs, const charts::PanelOptions& options,
                           quint64 generation) {
  if (!poll_timer_) {
    poll_timer_ = new QTimer(this);
    poll_timer_->setInterval(250);
    connect(poll_timer_, &QTimer::timeout, this, &DashboardLoader::poll);
  }
  poll_timer_->stop();
  if (generation < latest_show_) return;
  generation_ = generation;
  options_ = options;
  shown_ = runs;
  runs_.clear();
  news_waiting_ = false;
  read_version_.reset();
  if (!openStore()) return;
  const double started = now_ms();
  // Read before the records: a change committed during the load is read by
  // the first poll.
  std::optional<int64_t> version;
  try {
    version = store_->data_version();
  } catch (const std::exception&) {
  }
  // Another show asked for since this one began: stop at the next page.
  const charts::CancelCheck superseded = [this, generation] { return latest_show_ > generation; };
  try {
    // A long run is painted at once from its buckets, then read in full.
    bool coarse = false;
    for (const auto& run : runs)
      coarse = coarse || charts::has_more_steps_than(*store_, run.toStdString(), kCoarseAbove);
    if (coarse) {
      for (const auto& run : runs)
        runs_.push_back(charts::load_run_coarse(*store_, run.toStdString()));
      emitFrame(true, started);
      runs_.clear();
    }
    // A live run goes on growing while the window follows it: its older
    // rows are folded so that the window's memory stays bounded.
    for (const auto& run : runs)
      runs_.push_back(
          charts::load_run(*store_, run.toStdString(), charts::RowLimits{}, superseded));
  } catch (const charts::LoadCancelled&) {
    runs_.clear();
    emit loadCancelled(runs);
    return;
  } catch (const std::exception& e) {
    runs_.clear();
    emit failed(QString::fromStdString(e.what()), generation_);
    return;
  }
  read_version_ = version;
  emitFrame(false, started);
  poll_timer_->start();
}

void DashboardLoader::setOptions(const charts::PanelOptions& options, quint64 generation) {
  if (generation < latest_) return;
  generation_ = generation;
  options_ = options;
  if (runs_.empty()) return;
  emitFrame(false, now_ms());
}

void DashboardLoader::poll() {
  if (!store_ || runs_.empty()) return;
  bool live = false;
  for (const auto& run : runs_) live = live || !controller::is_terminal(run.run.state);
  // An ended run's last news may still wait for the window to take a frame.
  if (!live && !news_waiting_) {
    poll_timer_->stop();
    return;
  }
  const double started = now_ms();
  size_t added = 0;
  try {
    // Nothing committed since the last read: nothing to read.
    const int64_t version = store_->data_version();
    if (live && read_version_ == version && !news_waiting_) return;
    read_version_ = version;
    for (auto& run : runs_) {
      if (!live) break;
      const auto before = run.run.state;
      added += charts::load_new_records(*store_, run);
      if (run.run.state != before) ++added;  // a new state is news too
    }
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()), generation_);
    return;
  }
  if (added == 0 && !news_waiting_) return;
  if (frames_in_flight_ > 0) {
    news_waiting_ = true;  // drawn with the next frame the window can take
    return;
  }
  news_waiting_ = false;
  emitFrame(false, started);
}

void DashboardLoader::emitFrame(bool coarse, double started_ms) {
  auto frame = std::make_shared<DashboardFrame>();
  frame->generation = generation_;
  frame->runs = shown_;
  frame->coarse = coarse;
  std::vector<const charts::RunData*> runs;
  for (const auto& run : runs_) {
    runs.push_back(&run);
    frame->live = frame->live || !controller::is_terminal(run.run.state);
    frame->step_records += run.step_records();
    frame->facts.push_back(charts::facts_of(run));
  }
  if (!runs_.empty()) {
    const auto& first = runs_.front();
    for (const auto& [rank, columns] : first.ranks) frame->ranks.push_back(rank);
    for (const auto& [rank, start] : first.starts)
      if (!first.ranks.count(rank)) frame->ranks.push_back(rank);
    std::sort(frame->ranks.begin(), frame->ranks.end());
    frame->ranks.erase(std::unique(frame->ranks.begin(), frame->ranks.end()), frame->ranks.end());
    for (const auto& node : first.nodes) frame->nodes.push_back(node.name);
    frame->lead_rank = first.lead_rank();
  }
  for (const auto kind : charts::kAllPanels)
    frame->panels[kind] = charts::prepare(charts::build_panel(kind, runs, options_));
  frame->build_ms = now_ms() - started_ms;
  frames_in_flight_ = 1;
  emit frameReady(frame);
}

}  // namespace flotilla::gui
