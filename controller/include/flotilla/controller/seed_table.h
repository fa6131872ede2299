#pragma once
// A seed's own numbers beside a study's: resources/studies/NAME.seed.csv
// holds the table the seed's authors published, keyed by the study's axes,
// and a study report opens with "Seed vs ours", generated from it and the
// study's runs, so the comparison is made again whenever the report is.
//
// The file: a header row of keys, then one row per seed row. A key is an axis
// or config key of the study's sweep (the row's match: `ranks_per_node`,
// `batch_size`, a variant axis's label) or a compare column (`speedup`,
// `steady_epoch_s`, ...: the seed's figure for it). Cells are plain text or
// numbers; an empty cell is a figure the seed did not give. A sweep names its
// table in `report: {seed: NAME}`.

#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/study.h"
#include "flotilla/controller/sweep_store.h"
#include "flotilla/protocol/sweep.h"

namespace flotilla::controller {

struct SeedTable {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> rows;  // as long as keys each
};

// Throws ConfigError naming `source`, the line and what was expected (a cell
// count that differs from the header's, a quote left open, no rows).
SeedTable parse_seed_table(const std::string& csv_text, const std::string& source);

// The carried seed table the sweep's `report.seed` names (a study file's
// `report: {seed: dp-scaling}`); nullopt when it names none. Throws
// ConfigError for a name no table is carried under.
std::optional<SeedTable> carried_seed_table(const SweepSpec& spec);

struct SeedFigure {
  std::string column;  // compare column key
  std::optional<double> seed;
  std::optional<double> ours;   // the mean over the study's runs that match the row
  std::optional<double> ratio;  // ours / seed
};

struct SeedComparisonRow {
  std::vector<std::string> match;  // the seed row's values of the match keys
  std::vector<SeedFigure> figures;
};

struct SeedComparison {
  std::vector<std::string> match_keys;  // axes
  std::vector<std::string> columns;     // compare columns
  std::vector<SeedComparisonRow> rows;
};

// Each seed row against the study table's runs whose axis values equal the
// row's (numbers as numbers). Throws ConfigError for a key that is neither
// an axis of `spec` nor a compare column.
SeedComparison compare_with_seed(const SeedTable& seed, const SweepSpec& spec,
                                 const StudyTable& table, const std::vector<SweepPointRow>& points);

// Markdown: per row the match, then seed | ours | ours/seed per column; CSV:
// the same with numbers in full (`seed_vs_ours.csv`).
std::string seed_comparison_markdown(const SeedComparison& comparison);
std::string seed_comparison_csv(const SeedComparison& comparison);

}  // namespace flotilla::controller
