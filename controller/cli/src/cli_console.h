#pragma once
// What the `flotilla` commands share: a controller whose runs
// are reported on the console, and small helpers for arguments and errors.

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "exit_status.h"
#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"

namespace flotilla::controller {

// Prints what happens to followed runs: states, a throttled progress line
// from the lead rank's steps, problems on stderr. Thread-safe.
class ConsoleObserver final : public ControllerObserver {
 public:
  ConsoleObserver();
  void record_received(const std::string& run, const RecordRow& record) override;
  void state_changed(const std::string& run, RunState state, const std::string& reason) override;
  void problem(const std::string& message) override;
  // A line of someone else's (a sweep's progress), in turn with the runs' lines.
  void print(const std::string& line);

 private:
  bool tty_;
  std::mutex mutex_;
  int64_t steps_per_epoch_ = 0;
  std::chrono::steady_clock::time_point last_print_{};
};

// A controller whose runs are reported on the console. The observer comes
// first so that it outlives the controller's link threads, which call it.
struct ConsoleController {
  ConsoleController(Store& store, const ControllerOptions& options) : controller(store, options) {
    controller.set_observer(&observer);
  }
  ConsoleObserver observer;
  Controller controller;
};

void print_config_error(const std::string& source, const ConfigError& e);

// Follows `runs` to their ends and prints each one's summary; the status of the last.
int follow_to_end(Store& store, Controller& controller, const std::vector<std::string>& runs);

}  // namespace flotilla::controller
