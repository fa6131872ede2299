#pragma once
// Runs a Flotilla program as a child process and reads back its records.

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace flotilla::testing {

struct TrainRun {
  int exit_code = -1;
  std::string stderr_text;
  std::string stdout_text;              // run_plan only
  std::vector<nlohmann::json> records;  // what it wrote, in order
};

// Runs flotilla-train in `dir` on `config_text`, records into a file there.
// `prefix` goes before the command in the shell (ulimit, environment).
TrainRun run_train(const TempDir& dir, const std::string& config_text,
                   const std::string& prefix = "");
// Runs `ranks` flotilla-train processes of one run on 127.0.0.1 (torchrun's
// variables, a free port), `args` added to each command line; the records of
// every rank, rank by rank.
TrainRun run_train_ranks(const TempDir& dir, const std::string& config_text, int ranks,
                         const std::string& args = "");
// flotilla-train --plan on `config_text` (from a file, or piped into
// --config - when `from_stdin`), `args` added; the plan is stdout_text.
TrainRun run_plan(const TempDir& dir, const std::string& config_text, const std::string& args = "",
                  bool from_stdin = false);
// FLOTILLA_FAULT for the ranks started in its scope: "RANK:STEP" makes
// that rank throw at that step, "RANK:transition" kills it (SIGKILL) in the
// middle of an elastic transition.
class InjectedFault {
 public:
  explicit InjectedFault(const char* fault) { ::setenv("FLOTILLA_FAULT", fault, 1); }
  ~InjectedFault() { ::unsetenv("FLOTILLA_FAULT"); }
  InjectedFault(const InjectedFault&) = delete;
  InjectedFault& operator=(const InjectedFault&) = delete;
};

std::vector<nlohmann::json> of_type(const std::vector<nlohmann::json>& records,
                                    const std::string& type);

// CIFAR binary files in `dir`: `per_file` records per training file.
void write_cifar10(const std::filesystem::path& dir, int per_file, int test);
void write_cifar100(const std::filesystem::path& dir, int train, int test);

}  // namespace flotilla::testing
