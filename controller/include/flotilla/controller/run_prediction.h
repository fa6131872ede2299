#pragma once
// A run's step as predicted before it started (`flotilla run --predict`,
// docs/predict.md): flotilla-train --plan --predict's document, kept in the
// run_predictions table (migration 0010) so that compare sets it against
// what the run measured.

#include <cstdint>
#include <optional>
#include <string>

#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct RunPrediction {
  double step_ms = 0;
  double samples_per_s = 0;  // the job's
  int64_t samples_per_step = 0;
  int64_t peak_memory_bytes = 0;  // the fullest rank's; 0 from a plan made before it was predicted
  std::string links;              // the link bench it counted communication by; "" none
  std::string plan_json;
  int64_t created_ms = 0;
};

// Keeps `plan_json` (a plan with a `prediction`) for `run`, replacing any
// kept before; throws StoreError when the plan has no prediction.
void set_run_prediction(Store& store, const std::string& run, const std::string& plan_json);
std::optional<RunPrediction> run_prediction(const Store& store, const std::string& run);

}  // namespace flotilla::controller
