#include "cli_console.h"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flotilla/controller/run_summary.h"

namespace flotilla::controller {

ConsoleObserver::ConsoleObserver() : tty_(::isatty(STDOUT_FILENO)) {}

void ConsoleObserver::record_received(const std::string& run, const RecordRow& record) {
  if (record.rank != 0) return;
  std::lock_guard lock(mutex_);
  if (record.type == "start") {
    const auto j = nlohmann::json::parse(record.body, nullptr, false);
    if (j.is_object()) steps_per_epoch_ = j.value("steps_per_epoch", int64_t{0});
    return;
  }
  if (record.type != "step" || !is_lead_step(nlohmann::json::parse(record.body, nullptr, false)))
    return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_print_ < (tty_ ? std::chrono::milliseconds(250) : std::chrono::seconds(2))) return;
  last_print_ = now;
  const std::string line = run + "  " + progress_line(record, steps_per_epoch_);
  if (tty_)
    std::cout << "\r\033[K" << line << std::flush;
  else
    std::cout << line << std::endl;
}

void ConsoleObserver::state_changed(const std::string& run, RunState state,
                                    const std::string& reason) {
  print(run + "  " + std::string(name_of(state)) + (reason.empty() ? "" : ": " + reason));
}

void ConsoleObserver::problem(const std::string& message) {
  std::lock_guard lock(mutex_);
  std::cerr << "flotilla: " << message << std::endl;
}

void ConsoleObserver::print(const std::string& line) {
  std::lock_guard lock(mutex_);
  if (tty_) std::cout << "\r\033[K";
  std::cout << line << std::endl;
}

void print_config_error(const std::string& source, const ConfigError& e) {
  std::cerr << "flotilla: " << source << " cannot run:\n";
  for (const auto& problem : e.problems()) std::cerr << "  " << problem << "\n";
}

int follow_to_end(Store& store, Controller& controller, const std::vector<std::string>& runs) {
  int status = kExitDone;
  for (const auto& run : runs) {
    while (!controller.wait_for_end(run, std::chrono::seconds(1))) {
    }
    const auto row = store.run(run);
    std::cout << "\n" << summary_table(summarize(*row, store.records(run)));
    status = exit_status_of(row->state);
  }
  return status;
}

}  // namespace flotilla::controller
