#pragma once
// The compare table of N runs: one row per run with the numbers the seeds'
// authors tabulated by hand (throughput, step-time breakdown, bytes, busbw,
// memory, times, accuracy with its spread over repeats, speed-up and
// efficiencies against a baseline run, link utilisation), the config diff,
// and the table as text, Markdown, CSV or JSON. Every number comes from
// run_statistics.h; docs/compare.md gives each column's formula.
//
// Used by `flotilla compare` and `flotilla report`, the window's Compare
// view and the sweeps' study reports: call compare_runs() with run ids and
// format_compare() / write_report() (report.h) with its result.

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/controller/store.h"
#include "flotilla/protocol/run_statistics.h"

namespace flotilla::controller {

// Bad input to a comparison (unknown runs, column or baseline), every problem
// named; nothing is read past it.
class CompareError : public std::runtime_error {
 public:
  explicit CompareError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

struct CompareColumn {
  std::string key;         // what --columns and JSON call it
  std::string header;      // what the table and Markdown show
  int decimals = -1;       // numbers: digits after the point; -1: a text column
  std::string definition;  // one line; docs/compare.md has the formulas
};

// Every column in table order, and the ones shown when none are asked for.
const std::vector<CompareColumn>& compare_columns();
std::vector<std::string> default_compare_columns();
const CompareColumn* find_compare_column(std::string_view key);

// A number, a text, or neither (printed "—": the run has no such figure).
struct CompareCell {
  std::optional<double> number;
  std::string text;
  bool empty() const { return !number && text.empty(); }
};

struct CompareRow {
  RunRow run;
  metrics::RunStatistics stats;
  bool live = false;      // created, starting or running: numbers as of the table's time
  bool baseline = false;  // the row the derived columns are relative to
  // Marks a person must see beside the numbers: live, no steps, oom at
  // batch N, failed, malformed records skipped, ...
  std::vector<std::string> notes;
  std::map<std::string, CompareCell> cells;  // by column key, every column
};

// The config keys whose values differ between the runs, dotted ("optimizer.lr"),
// sorted; values[k][i] is key k's value in run i as compact JSON text, "—"
// where the run's config lacks it.
struct ConfigDiff {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;
};
ConfigDiff config_diff(const std::vector<std::string>& config_jsons);

struct CompareTable {
  std::vector<std::string> columns;  // the keys shown, in order
  std::vector<CompareRow> rows;      // in the order the runs were given
  size_t baseline = 0;
  ConfigDiff config_diff;
  std::vector<std::string> warnings;  // about the table as a whole
  int64_t as_of_ms = 0;
};

struct CompareOptions {
  std::optional<std::string> baseline;  // a run among those compared; default the first
  std::vector<std::string> columns;     // keys; empty: default_compare_columns()
};

// Reads what the table needs of each run from the store (steps, epochs,
// ends, rank 0's start, the CPU runs' system records) and derives the rows.
// Throws CompareError naming every unknown run and column and a baseline
// that is not among the runs; an empty list is an error too.
CompareTable compare_runs(const Store& store, const std::vector<std::string>& runs,
                          const CompareOptions& options = {});

// The runs of an experiment, oldest first; CompareError when there are none.
std::vector<std::string> runs_of_experiment(const Store& store, const std::string& experiment);

enum class CompareFormat { table, markdown, csv, json };
std::optional<CompareFormat> compare_format_from_name(std::string_view name);

// table and markdown: the summary, the notes and the config diff; csv: the
// summary alone (keys as headers, numbers in full); json: everything.
// Numbers are printed with a decimal point whatever the locale.
std::string format_compare(const CompareTable& table, CompareFormat format);
std::string format_config_diff(const CompareTable& table, CompareFormat format);
// A cell as the table and Markdown show it ("—" when empty).
std::string cell_text(const CompareTable& table, const CompareRow& row, const std::string& column);

}  // namespace flotilla::controller
