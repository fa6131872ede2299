#pragma once
// What a sweep would run, before anything is stored or started: its base
// resolved, its grid checked and expanded, each point validated and checked
// against the nodes that would host it. `flotilla sweep --dry-run` prints
// this and the window's sweep designer shows it live: one code path.

#include <cstdint>
#include <string>
#include <vector>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"
#include "flotilla/protocol/sweep.h"

namespace flotilla::controller {

// More runs than this in one sweep need --yes (the window's "queue them all").
inline constexpr int64_t kSweepRunsWithoutYes = 1000;

struct SweepPlanOptions {
  std::string nodes;  // replaces the base's nodes (comma-separated); empty: the base's
  bool yes = false;   // queue more than kSweepRunsWithoutYes runs
};

// Resolves a base named by a stored experiment into spec.base_json, checks
// the node option and the grid's size, and expands the grid; each point the
// validator refuses, or (given a controller) that its nodes cannot host,
// carries the reasons in `problems`. Throws ConfigError naming the field
// (base, --nodes, axes) when the sweep as a whole cannot run.
std::vector<SweepPoint> plan_sweep(const Store& store, const Controller* controller,
                                   SweepSpec& spec, const SweepPlanOptions& options = {});

// "4 batch_size x 3 ranks_per_node x 2 repeats", "one point".
std::string sweep_grid_shape(const SweepSpec& spec);

}  // namespace flotilla::controller
