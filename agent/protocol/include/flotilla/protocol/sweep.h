#pragma once
// A sweep: a base experiment and axes over its config keys, whose product is
// a grid of experiments run one after another. One parser for the CLI, the
// window and the tests; the controller stores and runs what it gives.
//
//   name: dp-scaling
//   base: {model: resnet18, ...}        # inline, or
//   # base: stored-experiment-name      # resolved by the controller, or
//   # base_file: ../presets/x.yaml      # relative to the sweep file
//   axes:
//     batch_size: {values: [32, 128, 512, 2048], until: oom}
//     ranks_per_node: [1, 2, 4]
//     compression: [{method: none}, {method: sort_quant, bits: 12, split_bits: 4}]
//     algorithm:                        # not a config key: named variants,
//       variants:                       # each merged into the whole config
//         DDP: {strategy: ddp}
//         Pipe+DDP: {strategy: pipeline_ddp, chunks: 4, replicas: 2}
//   repeat: 3                           # seeds seed, seed+1, seed+2
//   report:                             # optional: a study's table (`flotilla study run`)
//     columns: [ranks_per_node, batch_size, {epoch_s: time}, speedup]
//     group_by: [batch_size]            # each group has a baseline of its own,
//     baseline: {ranks_per_node: 1}     # the first point of the group matching this
//
// docs/sweeps.md is the reference.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

struct SweepAxis {
  // A dotted config key (`batch_size`, `compression.bits`, `compression`),
  // or, for an axis of variants, its name.
  std::string key;
  // Each value as compact JSON; for variants, each label as a JSON string.
  std::vector<std::string> values;
  // Variants only: each value's mapping (compact JSON), merged into the config.
  std::vector<std::string> variants;
  // After a point ends `oom`, the larger values of this axis (for the same
  // values of every other axis) are not run.
  bool until_oom = false;

  bool has_variants() const { return !variants.empty(); }
};

// How a study's report lays out its table: the seed's columns in the seed's
// order, and which run each row's speed-up is relative to. The names are
// checked here as far as the protocol knows them (axes, config keys); the
// controller checks the columns against its compare columns.
struct SweepReportSpec {
  // Axis names (the point's value or variant label) and compare column keys;
  // each given as `key` or `{key: Header}` (the seed's heading).
  std::vector<std::string> columns;
  std::vector<std::string> headers;  // per column; empty: the column's own
  // Axis names or dotted config keys: the rows with equal values of these
  // form one group, with one baseline. Empty: one group.
  std::vector<std::string> group_by;
  // {key: value, ...} over axis names or config keys: a group's baseline is
  // its first point whose values match. Empty: the group's first point.
  std::string baseline_json;
  // The seed table the report opens with ("dp-scaling": the controller's
  // carried dp-scaling.seed.csv, flotilla/controller/seed_table.h). Empty: none.
  std::string seed;
  // The study's chart in the seed's shape: `y` (a compare column) against
  // `x` (an axis or config key), one line per value of `series` (axes or
  // config keys; none: one line), the seed's own points beside ours.
  struct Chart {
    std::string x, y;
    std::vector<std::string> series;
    std::string title;  // empty: "<y> against <x>"
    bool empty() const { return x.empty() && y.empty(); }
  } chart;

  bool empty() const {
    return columns.empty() && group_by.empty() && baseline_json.empty() && seed.empty() &&
           chart.empty();
  }
};

struct SweepSpec {
  std::string name;
  std::string description;
  // The base experiment as a JSON mapping: inline, or read from base_file.
  // It need not be valid alone; each point is validated.
  std::string base_json;
  // Or the name of a stored experiment, for the controller to resolve into
  // base_json (empty once resolved, or when the base is inline).
  std::string base_experiment;
  // What changes when the sweep runs on nodes given to it (`--nodes`): a
  // mapping of config keys merged into the base, e.g. {ranks_per_node: 1}
  // for a study whose ranks share one node unless nodes are named. Empty: none.
  std::string on_nodes_json;
  std::vector<SweepAxis> axes;  // in file order: the last one varies fastest
  int64_t repeat = 1;           // runs of each point, with seeds seed, seed+1, ...
  SweepReportSpec report;       // a study's table; empty for a plain sweep
};

struct SweepPoint {
  int64_t index = 0;                  // in grid order, from 0
  std::vector<int64_t> coords;        // per axis, the index of this point's value
  int64_t repeat = 0;                 // 0 .. repeat-1; the seed is the config's seed + repeat
  std::string values_json;            // {"axis": value, ...} in axis order (variants: their labels)
  std::string config_json;            // the point's experiment, validated; empty when refused
  std::vector<std::string> problems;  // why the validator refused the point

  bool refused() const { return !problems.empty(); }
};

// Parses and checks a sweep file's text; throws ConfigError with a
// "key: what is wrong" line for every problem. `base_dir` resolves base_file;
// `default_name` is used when the file has no `name` (a file's stem).
SweepSpec parse_sweep(std::string_view text, std::string_view source = "sweep",
                      const std::filesystem::path& base_dir = {},
                      std::string_view default_name = {});
SweepSpec load_sweep(const std::filesystem::path& file);

// The sweep as JSON with its base inline, as stored; parse_sweep reads it back.
std::string sweep_to_json(const SweepSpec& spec);

// Points × repeat, without expanding the grid.
int64_t sweep_size(const SweepSpec& spec);

// Every point of the grid in order: the product of the axes (last axis
// fastest), each repeat of a point after it. A point's config is base_json
// with its values applied in axis order (a mapping is merged into the section
// its key names, variants into the whole config), named "<sweep>#<n>", its
// seed raised by its repeat, then validated by parse_experiment. `nodes`, when
// given, replaces the base's nodes and on_nodes is merged into the base.
// Needs base_json (a resolved base).
std::vector<SweepPoint> expand_sweep(const SweepSpec& spec,
                                     const std::vector<std::string>& nodes = {});

// Once point `oom_point` has ended out of memory: the points `until: oom`
// drops, each with its reason ("oom at batch_size 512"). For every until-oom
// axis, those with a larger value of it and the same value of every other
// axis, whatever their repeat. `coords` are every point's, in grid order.
struct DroppedPoint {
  int64_t index = 0;
  std::string reason;
};
std::vector<DroppedPoint> dropped_after_oom(const std::vector<SweepAxis>& axes,
                                            const std::vector<std::vector<int64_t>>& coords,
                                            int64_t oom_point);

// The value of `key` at a point: the axis of that name's value (a variant's
// label) from `values_json`, else the dotted config key from `config_json`;
// null when neither has it. What report.group_by and report.baseline read.
std::string point_value_json(const SweepSpec& spec, const std::string& values_json,
                             const std::string& config_json, const std::string& key);

// A value as a person reads it in a table: 32, ddp, {method: none}, [a, b].
std::string value_text(std::string_view value_json);

// A sweep's name: letters, digits, '.', '_', '-' (it names the sweep on the
// command line); the problem with `name`, empty when fine.
std::string sweep_name_problem(std::string_view name);

}  // namespace flotilla
