#pragma once
// The smallest run the store takes, for the tests of the store itself: what
// they check is records, buckets and writes, not the run's config.

#include <string>

#include "flotilla/controller/store.h"

namespace flotilla::testing {

inline controller::RunRow minimal_run(const std::string& id, int world_size = 2) {
  controller::RunRow run;
  run.id = id;
  run.experiment_name = "exp";
  run.config_json = "{}";
  run.nodes = {"local"};
  run.world_size = world_size;
  run.created_ms = controller::now_ms();
  return run;
}

}  // namespace flotilla::testing
