#include "flotilla/controller/sweep_runner.h"

#include <unistd.h>

#include <QRandomGenerator>
#include <QSysInfo>
#include <algorithm>
#include <fstream>
#include <sstream>

namespace flotilla::controller {
namespace {

using namespace std::chrono_literals;

// An owner on another host is gone once it has not renewed for this long; it
// renews every kRenewEvery.
constexpr int64_t kLeaseMs = 60000;
constexpr auto kRenewEvery = 5s;

// The start time of process `pid` in clock ticks since boot (field 22 of
// /proc/PID/stat), empty when there is no such live process.
std::string process_start_time(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return {};
  const auto close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return {};
  std::istringstream fields(line.substr(close_paren + 1));
  std::string field, state;
  fields >> state;  // field 3
  if (state == "Z" || state == "X") return {};
  for (int i = 4; i <= 22 && fields >> field; ++i) {
  }
  return field;
}

std::string host_name() {
  return QSysInfo::machineHostName().toStdString();
}

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

}  // namespace

std::string new_owner_identity() {
  const pid_t pid = ::getpid();
  return host_name() + " " + std::to_string(pid) + " " + process_start_time(pid) + " " +
         QString::number(QRandomGenerator::global()->generate(), 16).toStdString();
}

bool owner_alive(const std::string& owner, int64_t seen_ms) {
  std::istringstream fields(owner);
  std::string host, start;
  pid_t pid = 0;
  if (!(fields >> host >> pid >> start)) return now_ms() - seen_ms < kLeaseMs;
  if (host != host_name()) return now_ms() - seen_ms < kLeaseMs;
  return process_start_time(pid) == start;
}

SweepRunner::SweepRunner(Store& store, Controller& controller, std::string sweep,
                         SweepObserver* observer)
    : store_(store),
      sweeps_(store),
      controller_(controller),
      name_(std::move(sweep)),
      observer_(observer),
      identity_(new_owner_identity()) {}

SweepRunner::~SweepRunner() {
  stop();
  release();
}

void SweepRunner::stop() {
  stopping_ = true;
  wake_.notify_all();
}

bool SweepRunner::acquire(std::string* holder) {
  const auto sweep = sweeps_.sweep(name_);
  if (!sweep) throw StoreError("no sweep \"" + name_ + "\" in " + store_.path().toStdString());
  if (!sweeps_.take_ownership(sweep->id, identity_, owner_alive, holder)) return false;
  sweep_id_ = sweep->id;
  std::lock_guard lock(mutex_);
  if (released_) {
    released_ = false;
    lost_ = false;
    renewer_ = std::thread([this] { renew_until_released(); });
  }
  return true;
}

void SweepRunner::renew_until_released() {
  std::unique_lock lock(mutex_);
  while (!released_) {
    wake_.wait_for(lock, kRenewEvery, [this] { return released_; });
    if (released_) return;
    lock.unlock();
    bool owned = true;
    try {
      owned = sweeps_.renew_ownership(sweep_id_, identity_);
    } catch (const std::exception& e) {
      if (observer_) observer_->problem("sweep " + name_ + ": " + e.what());
    }
    lock.lock();
    if (!owned) {
      // Not ours any more (the sweep ended, or a controller elsewhere took it
      // over after the lease ran out): stop claiming points.
      lost_ = true;
      return;
    }
  }
}

void SweepRunner::release() {
  std::thread renewer;
  {
    std::lock_guard lock(mutex_);
    if (released_) return;
    released_ = true;
    renewer.swap(renewer_);
  }
  wake_.notify_all();
  if (renewer.joinable()) renewer.join();
  try {
    sweeps_.release_ownership(sweep_id_, identity_);
  } catch (const std::exception& e) {
    if (observer_) observer_->problem("sweep " + name_ + ": " + e.what());
  }
}

SweepState SweepRunner::run() {
  SweepState state = SweepState::running;
  while (!should_stop()) {
    const auto sweep = sweeps_.sweep(name_);
    if (!sweep) break;
    if (sweep->state != SweepState::running) {
      state = sweep->state;
      break;
    }
    const auto points = sweeps_.points(sweep->id);
    const auto has = [](PointState s) { return [s](const auto& p) { return p.state == s; }; };
    // A point already running: this runner's last one, or one a controller
    // that went away left behind.
    if (auto live = std::find_if(points.begin(), points.end(), has(PointState::running));
        live != points.end()) {
      settle(*sweep, *live, points);
      continue;
    }
    const auto next = std::find_if(points.begin(), points.end(), has(PointState::queued));
    if (next == points.end()) {
      sweeps_.finish_if_done(sweep->id);
      continue;  // read back: finished (or killed meanwhile)
    }
    start_point(*sweep, *next);
  }
  release();
  return state;
}

void SweepRunner::start_point(const SweepRow& sweep, const SweepPointRow& point) {
  const std::string run = Controller::new_run_id();
  if (!sweeps_.claim(sweep.id, point.index, run, identity_)) {
    // Only the owner claims: unless another controller has taken the sweep
    // over, the point has just moved (killed), and the next turn sees why.
    if (!sweeps_.renew_ownership(sweep.id, identity_)) lost_ = true;
    return;
  }
  if (observer_) observer_->point_started(sweep, point, run);
  std::string refusal;
  try {
    controller_.start_run(parse_experiment(point.config_json, sweep.name), std::nullopt, run);
    if (observer_) observer_->point_run_stored(sweep, point, run);
  } catch (const ConfigError& e) {
    refusal = joined_lines(e.problems());
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  if (!refusal.empty()) {
    // Nothing started: the point failed, the sweep goes on.
    if (sweeps_.end_point(sweep.id, point.index, PointState::failed, refusal) && observer_)
      observer_->point_ended(sweep, point, PointState::failed, refusal);
    return;
  }
  // `sweep kill` while the run was being created found no run to stop.
  const auto now = sweeps_.sweep(sweep.name);
  if (now && now->state == SweepState::killed) controller_.kill_run(run);
}

void SweepRunner::settle(const SweepRow& sweep, const SweepPointRow& point,
                         const std::vector<SweepPointRow>& points) {
  auto run = store_.run(point.run_id);
  if (!run) {
    // Claimed by an owner that went away before it stored the run: nothing
    // of it was started (the run row comes before any agent hears of it),
    // so it is queued again rather than run twice.
    sweeps_.requeue(sweep.id, point.index);
    return;
  }
  controller_.attach(point.run_id);  // nothing when this controller follows it already
  while (!controller_.wait_for_end(point.run_id, 1s))
    if (should_stop()) return;
  run = store_.run(point.run_id);
  const auto state = point_state_of(run->state);
  if (!sweeps_.end_point(sweep.id, point.index, state, run->reason)) return;
  if (observer_) observer_->point_ended(sweep, point, state, run->reason);
  if (state == PointState::oom) apply_until_oom(sweep, point, points);
}

void SweepRunner::apply_until_oom(const SweepRow& sweep, const SweepPointRow& point,
                                  const std::vector<SweepPointRow>& points) {
  std::vector<SweepAxis> axes;
  try {
    axes = parse_sweep(sweep.spec_json, "sweep " + sweep.name).axes;
  } catch (const ConfigError& e) {
    if (observer_)
      observer_->problem("sweep " + sweep.name + ": its stored definition no longer reads (" +
                         joined_lines(e.problems()) + "); until: oom is not applied");
    return;
  }
  std::vector<std::vector<int64_t>> coords;
  for (const auto& p : points) coords.push_back(p.coords);
  const auto dropped = dropped_after_oom(axes, coords, point.index);
  const auto moved = sweeps_.skip(sweep.id, dropped);
  std::vector<DroppedPoint> skipped;
  for (const auto& d : dropped)
    if (std::find(moved.begin(), moved.end(), d.index) != moved.end()) skipped.push_back(d);
  if (!skipped.empty() && observer_) observer_->points_skipped(sweep, skipped);
}

SweepPool::SweepPool(Store& store, Controller& controller, SweepObserver* observer)
    : store_(store), controller_(controller), observer_(observer) {}

SweepPool::~SweepPool() {
  {
    std::lock_guard lock(mutex_);
    for (auto& e : entries_) e->runner->stop();
  }
  wait();
}

std::vector<std::string> SweepPool::continue_live_sweeps(std::vector<std::string>* held_elsewhere) {
  std::vector<std::string> taken;
  for (const auto& sweep : SweepStore(store_).sweeps()) {
    if (sweep.state != SweepState::running) continue;
    {
      std::lock_guard lock(mutex_);
      if (std::any_of(entries_.begin(), entries_.end(),
                      [&](const auto& e) { return e->name == sweep.name; }))
        continue;
    }
    auto entry = std::make_unique<Entry>();
    entry->name = sweep.name;
    entry->runner = std::make_unique<SweepRunner>(store_, controller_, sweep.name, observer_);
    std::string holder;
    if (!entry->runner->acquire(&holder)) {
      if (held_elsewhere && !holder.empty())
        held_elsewhere->push_back(sweep.name + " (" + holder + ")");
      continue;
    }
    Entry* e = entry.get();
    e->thread = std::thread([e] { e->state = e->runner->run(); });
    taken.push_back(sweep.name);
    std::lock_guard lock(mutex_);
    entries_.push_back(std::move(entry));
  }
  return taken;
}

std::vector<std::pair<std::string, SweepState>> SweepPool::wait() {
  std::vector<Entry*> entries;
  {
    std::lock_guard lock(mutex_);
    for (auto& e : entries_) entries.push_back(e.get());
  }
  std::vector<std::pair<std::string, SweepState>> states;
  for (auto* e : entries) {
    if (e->thread.joinable()) e->thread.join();
    states.emplace_back(e->name, e->state);
  }
  return states;
}

}  // namespace flotilla::controller
