#pragma once
// Runs as the store keeps them, for tests: the smallest one the store takes
// (the store's own tests check records, buckets and writes, not the config),
// and a local CPU DDP run (the charts' tests read its config).

#include <nlohmann/json.hpp>

#include <stdexcept>
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

// minimal_run stored and moved on to running, as an agent's Started leaves
// it: a run a controller can attach to. Throws when the store refuses.
inline void store_running_run(controller::Store& store, const std::string& id) {
  store.create_run(minimal_run(id));
  if (!store.transition(id, controller::RunState::starting) ||
      !store.transition(id, controller::RunState::running))
    throw std::runtime_error("run " + id + " could not be moved to running");
}

// A local CPU DDP run of `world_size` ranks, as the store keeps it.
inline controller::RunRow ddp_run_row(const std::string& id, const std::string& experiment,
                                      int world_size) {
  controller::RunRow run;
  run.id = id;
  run.experiment_name = experiment;
  run.config_json = nlohmann::json{
      {"name", experiment},
      {"strategy", "ddp"},
      {"device", "cpu"},
      {"nodes",
       {"local"}}}.dump();
  run.nodes = {"local"};
  run.world_size = world_size;
  return run;
}

}  // namespace flotilla::testing
