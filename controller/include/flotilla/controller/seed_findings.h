#pragma once
// What a seed concluded, checked against the study: resources/studies/
// NAME.findings.csv lists the seed's findings, each an ordering of one figure
// between two rows of its own table ("at batch 32, 2 GPUs are slower than
// one": speedup of ranks_per_node=2; batch_size=32 below that of
// ranks_per_node=1; batch_size=32). The report judges each against the
// study's runs: agrees when ours keep the seed's order, differs when not,
// with both pairs of numbers and, when it differs, the finding's own reason
// why it may (what this scale changes).
//
// The file, one finding a row: finding (the words), figure (a column of the
// seed table), row and than (a seed row each, as `key=value; key=value` over
// the seed table's match keys), relation (`above` or `below`: row's figure
// against than's), if_differs (why ours may not keep the order).

#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/seed_table.h"

namespace flotilla::controller {

struct SeedFinding {
  std::string says, figure, relation, if_differs;
  size_t row = 0, than = 0;  // rows of the seed table
};

// Throws ConfigError naming `source`, the line and what is wrong: a figure
// the seed table lacks, a row that names no seed row (or several), a relation
// other than above/below, and a finding the seed's own figures do not show.
std::vector<SeedFinding> parse_seed_findings(const std::string& csv_text, const std::string& source,
                                             const SeedTable& seed);

// The carried findings of the sweep's seed table (NAME.findings.csv beside
// NAME.seed.csv); empty when none are carried.
std::vector<SeedFinding> carried_seed_findings(const SweepSpec& spec, const SeedTable& seed);

struct FindingVerdict {
  std::string says, figure;
  double seed_row = 0, seed_than = 0;
  std::optional<double> ours_row, ours_than;
  std::string verdict;  // agrees, differs, not measured
  std::string why;
};

// Each finding against the study's figures in `comparison` (made from the
// same seed table).
std::vector<FindingVerdict> judge_findings(const std::vector<SeedFinding>& findings,
                                           const SeedComparison& comparison);

// Markdown: finding | figure | seed | ours | verdict | why.
std::string findings_markdown(const std::vector<FindingVerdict>& verdicts);

}  // namespace flotilla::controller
