#pragma once
// A sweep's points as a table: each axis's value, the seed (repeats), state,
// run, throughput and reason; printed as an aligned table, Markdown or CSV,
// or as JSON. (`flotilla sweep show` adds the compare table of its runs: compare.h.)

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/controller/store.h"
#include "flotilla/controller/sweep_store.h"
#include "flotilla/protocol/sweep.h"

namespace flotilla::controller {

struct TextTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

// `store` gives each run's throughput (samples/s); without one (a dry run,
// nothing ran) the table has no run and throughput columns.
TextTable sweep_table(const SweepSpec& spec, const std::vector<SweepPointRow>& points,
                      const Store* store);
// format: table (aligned, reasons cut to their first line), markdown, csv.
std::string render_table(const TextTable& table, std::string_view format);
std::string sweep_json(const Store& store, const SweepRow& sweep, const SweepSpec& spec,
                       const std::vector<SweepPointRow>& points);

// A run's throughput in samples/s (nothing before its steps are stored).
std::optional<double> run_throughput(const Store& store, const std::string& run);

// "batch_size 128, ranks_per_node 2": a point's values as one phrase.
std::string point_values_text(const std::string& values_json);

}  // namespace flotilla::controller
