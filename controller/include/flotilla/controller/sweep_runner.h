#pragma once
// Runs a stored sweep: one point at a time through the Controller, whatever
// each point's outcome, applying `until: oom`, until no point is queued or
// the sweep is killed. A sweep survives its controller as a run does: its
// owner is a controller process, and when that process is gone another one
// (`flotilla attach`, the window on start) takes the sweep over, follows the
// point that was running and goes on with the queue.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/sweep_store.h"

namespace flotilla::controller {

// Called on the runner's thread.
class SweepObserver {
 public:
  virtual ~SweepObserver() = default;
  virtual void point_started(const SweepRow& /*sweep*/, const SweepPointRow& /*point*/,
                             const std::string& /*run*/) {}
  // The point's run is stored and its start under way (after point_started).
  virtual void point_run_stored(const SweepRow& /*sweep*/, const SweepPointRow& /*point*/,
                                const std::string& /*run*/) {}
  virtual void point_ended(const SweepRow& /*sweep*/, const SweepPointRow& /*point*/,
                           PointState /*state*/, const std::string& /*reason*/) {}
  virtual void points_skipped(const SweepRow& /*sweep*/,
                              const std::vector<DroppedPoint>& /*points*/) {}
  virtual void problem(const std::string& /*message*/) {}
};

// Which controller owns a sweep: "host pid start-time nonce".
std::string new_owner_identity();
// Whether the owner is still there: on this host, whether its process lives
// (the same pid and start time); elsewhere, whether it spoke within the lease.
bool owner_alive(const std::string& owner, int64_t seen_ms);

class SweepRunner {
 public:
  SweepRunner(Store& store, Controller& controller, std::string sweep,
              SweepObserver* observer = nullptr);
  ~SweepRunner();  // releases the sweep if it still owns it; its live run goes on
  SweepRunner(const SweepRunner&) = delete;
  SweepRunner& operator=(const SweepRunner&) = delete;

  // The owner this runner writes into the sweep (create the sweep with it).
  const std::string& identity() const { return identity_; }
  // Takes the sweep over unless it has ended or another live controller owns
  // it (then false, that owner in `holder`). Renews the ownership from then on.
  bool acquire(std::string* holder = nullptr);
  // Works through the queue; returns the sweep's state when it returns:
  // finished, killed, or running after stop() (or a lost ownership).
  SweepState run();
  // From any thread: run() returns soon, leaving the live run to go on.
  void stop();

 private:
  void start_point(const SweepRow& sweep, const SweepPointRow& point);
  // Follows a claimed point's run to its end and stores its outcome.
  void settle(const SweepRow& sweep, const SweepPointRow& point,
              const std::vector<SweepPointRow>& points);
  void apply_until_oom(const SweepRow& sweep, const SweepPointRow& point,
                       const std::vector<SweepPointRow>& points);
  void renew_until_released();
  void release();
  bool should_stop() const { return stopping_ || lost_; }

  Store& store_;
  SweepStore sweeps_;
  Controller& controller_;
  std::string name_;
  SweepObserver* observer_;
  std::string identity_;
  int64_t sweep_id_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> lost_{false};  // another controller owns the sweep now
  std::mutex mutex_;
  std::condition_variable wake_;
  bool released_ = true;
  std::thread renewer_;
};

// Sweeps run on threads of their own, for programs that do other things
// meanwhile: `flotilla attach` follows runs, the window stays responsive.
class SweepPool {
 public:
  SweepPool(Store& store, Controller& controller, SweepObserver* observer = nullptr);
  ~SweepPool();  // stops every runner and waits for it; their live runs go on
  SweepPool(const SweepPool&) = delete;
  SweepPool& operator=(const SweepPool&) = delete;

  // Takes over every running sweep that no live controller owns and runs it;
  // returns their names. Those another live controller runs go into
  // `held_elsewhere` as "name (owner)".
  std::vector<std::string> continue_live_sweeps(std::vector<std::string>* held_elsewhere = nullptr);
  // Waits until every sweep taken has returned; each one's name and state.
  std::vector<std::pair<std::string, SweepState>> wait();

 private:
  struct Entry {
    std::string name;
    std::unique_ptr<SweepRunner> runner;
    std::thread thread;
    SweepState state = SweepState::running;
  };
  Store& store_;
  Controller& controller_;
  SweepObserver* observer_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace flotilla::controller
