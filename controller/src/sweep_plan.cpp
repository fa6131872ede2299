#include "flotilla/controller/sweep_plan.h"

namespace flotilla::controller {
namespace {

// The stored experiment a sweep names as its base, inline.
void resolve_base(const Store& store, SweepSpec& spec) {
  if (spec.base_experiment.empty()) return;
  const auto stored = store.experiment(spec.base_experiment);
  if (!stored)
    throw ConfigError({"base: no stored experiment \"" + spec.base_experiment +
                       "\" (`flotilla experiments list` shows them)"});
  spec.base_json = stored->config_json;
  spec.base_experiment.clear();
}

}  // namespace

std::string sweep_grid_shape(const SweepSpec& spec) {
  std::string shape;
  for (const auto& axis : spec.axes)
    shape += (shape.empty() ? "" : " x ") + std::to_string(axis.values.size()) + " " + axis.key;
  if (spec.repeat > 1)
    shape += (shape.empty() ? "" : " x ") + std::to_string(spec.repeat) + " repeats";
  return shape.empty() ? "one point" : shape;
}

std::vector<SweepPoint> plan_sweep(const Store& store, const Controller* controller,
                                   SweepSpec& spec, const SweepPlanOptions& options) {
  resolve_base(store, spec);
  std::vector<std::string> nodes;
  if (!options.nodes.empty()) {
    for (const auto& axis : spec.axes)
      if (axis.key == "nodes")
        throw ConfigError({"--nodes: the sweep varies nodes (axis nodes); give one or the other"});
    nodes = split_list(options.nodes);
  }
  const int64_t runs = sweep_size(spec);
  if (runs > kSweepRunsWithoutYes && !options.yes)
    throw ConfigError({"axes: the grid is " + std::to_string(runs) + " runs (" +
                       sweep_grid_shape(spec) + "), more than " +
                       std::to_string(kSweepRunsWithoutYes) + "; pass --yes to queue them all"});
  auto points = expand_sweep(spec, nodes);
  if (!controller) return points;
  // What the nodes cannot host is refused with the validator's refusals.
  for (auto& point : points) {
    if (point.refused()) continue;
    for (auto& problem :
         controller->hosting_problems(parse_experiment(point.config_json, spec.name)))
      point.problems.push_back(std::move(problem));
    if (point.refused()) point.config_json.clear();
  }
  return points;
}

}  // namespace flotilla::controller
