// The seed's findings judged against the study's runs.
#include "flotilla/controller/seed_findings.h"

#include <QFile>
#include <algorithm>
#include <sstream>

#include "flotilla/controller/compare.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::controller {
namespace {

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// The seed rows matching `selector` ("ranks_per_node=2; batch_size=32").
std::vector<size_t> rows_matching(const SeedTable& seed, const std::string& selector,
                                  std::string& problem) {
  std::vector<std::pair<size_t, std::string>> wanted;  // seed column, value
  std::istringstream parts(selector);
  for (std::string part; std::getline(parts, part, ';');) {
    const auto equals = part.find('=');
    const auto key = trimmed(part.substr(0, equals));
    const auto column = std::find(seed.keys.begin(), seed.keys.end(), key);
    if (equals == std::string::npos || column == seed.keys.end()) {
      problem = "\"" + trimmed(part) + "\" is not key=value with a key of the seed table";
      return {};
    }
    wanted.emplace_back(column - seed.keys.begin(), trimmed(part.substr(equals + 1)));
  }
  std::vector<size_t> rows;
  for (size_t r = 0; r < seed.rows.size(); ++r) {
    bool same = !wanted.empty();
    for (const auto& [column, value] : wanted) {
      const auto& cell = seed.rows[r][column];
      const auto a = parse_number(cell), b = parse_number(value);
      same = same && (a && b ? *a == *b : cell == value);
    }
    if (same) rows.push_back(r);
  }
  if (rows.size() != 1)
    problem = "\"" + selector + "\" names " + std::to_string(rows.size()) +
              " rows of the seed table; expected one";
  return rows;
}

bool holds(const std::string& relation, double row, double than) {
  return relation == "above" ? row > than : row < than;
}

std::string number(double value) {
  return format_fixed(value, 3);
}

std::string order(double row, double than) {
  return number(row) + (row > than ? " > " : row < than ? " < " : " = ") + number(than);
}

}  // namespace

std::vector<SeedFinding> parse_seed_findings(const std::string& csv_text, const std::string& source,
                                             const SeedTable& seed) {
  const auto table = parse_seed_table(csv_text, source);
  const std::vector<std::string> columns{"finding",  "figure", "row",
                                         "relation", "than",   "if_differs"};
  if (table.keys != columns)
    throw ConfigError(
        {source + " line 1: expected the header finding,figure,row,relation,than," + "if_differs"});
  std::vector<SeedFinding> findings;
  std::vector<std::string> problems;
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const auto& cells = table.rows[i];
    // Line numbers as the file has them, for a file without blank lines.
    const std::string where = source + " line " + std::to_string(i + 2) + ": ";
    SeedFinding f{cells[0], cells[1], cells[3], cells[5], 0, 0};
    const auto figure = std::find(seed.keys.begin(), seed.keys.end(), f.figure);
    if (figure == seed.keys.end() || !find_compare_column(f.figure)) {
      problems.push_back(where + "figure \"" + f.figure + "\" is not a figure of the seed table");
      continue;
    }
    if (f.relation != "above" && f.relation != "below") {
      problems.push_back(where + "relation: expected above or below, got \"" + f.relation + "\"");
      continue;
    }
    std::string problem;
    const auto row = rows_matching(seed, cells[2], problem);
    const auto than = problem.empty() ? rows_matching(seed, cells[4], problem) : row;
    if (!problem.empty()) {
      problems.push_back(where + problem);
      continue;
    }
    f.row = row.front(), f.than = than.front();
    const auto column = static_cast<size_t>(figure - seed.keys.begin());
    const auto a = parse_number(seed.rows[f.row][column]);
    const auto b = parse_number(seed.rows[f.than][column]);
    if (!a || !b || !holds(f.relation, *a, *b)) {
      problems.push_back(where + "the seed's own " + f.figure + " figures do not show this (" +
                         (a && b ? order(*a, *b) : std::string("a figure is missing")) + ")");
      continue;
    }
    findings.push_back(std::move(f));
  }
  if (!problems.empty()) throw ConfigError(problems);
  return findings;
}

std::vector<SeedFinding> carried_seed_findings(const SweepSpec& spec, const SeedTable& seed) {
  if (spec.report.seed.empty()) return {};
  const auto name = spec.report.seed + ".findings.csv";
  QFile file(QString::fromStdString(":/studies/" + name));
  if (!file.open(QIODevice::ReadOnly)) return {};
  return parse_seed_findings(file.readAll().toStdString(), name, seed);
}

std::vector<FindingVerdict> judge_findings(const std::vector<SeedFinding>& findings,
                                           const SeedComparison& comparison) {
  std::vector<FindingVerdict> verdicts;
  for (const auto& f : findings) {
    const auto column = std::find(comparison.columns.begin(), comparison.columns.end(), f.figure);
    if (column == comparison.columns.end() || f.row >= comparison.rows.size() ||
        f.than >= comparison.rows.size())
      continue;  // made from another table: nothing to judge
    const auto c = static_cast<size_t>(column - comparison.columns.begin());
    const auto& row = comparison.rows[f.row].figures[c];
    const auto& than = comparison.rows[f.than].figures[c];
    FindingVerdict v{
        f.says, f.figure, row.seed.value_or(0), than.seed.value_or(0), row.ours, than.ours, {}, {}};
    if (!v.ours_row || !v.ours_than) {
      v.verdict = "not measured";
      v.why = "the study has no " + f.figure + " for " +
              (!v.ours_row ? std::string("the first row") : std::string("the second row"));
    } else if (holds(f.relation, *v.ours_row, *v.ours_than)) {
      v.verdict = "agrees";
      v.why =
          "seed " + order(v.seed_row, v.seed_than) + ", ours " + order(*v.ours_row, *v.ours_than);
    } else {
      v.verdict = "differs";
      v.why = "seed " + order(v.seed_row, v.seed_than) + ", ours " +
              order(*v.ours_row, *v.ours_than) +
              (f.if_differs.empty() ? std::string() : ": " + f.if_differs);
    }
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

std::string findings_markdown(const std::vector<FindingVerdict>& verdicts) {
  std::ostringstream md;
  md << "| the seed found | figure | seed | ours | verdict | why |\n"
     << "| --- | --- | --- | --- | --- | --- |\n";
  const auto pair = [](std::optional<double> a, std::optional<double> b) {
    return (a ? format_fixed(*a, 3) : "—") + " vs " + (b ? format_fixed(*b, 3) : "—");
  };
  for (const auto& v : verdicts) {
    const auto* column = find_compare_column(v.figure);
    md << "| " << v.says << " | " << (column ? column->header : v.figure) << " | "
       << pair(v.seed_row, v.seed_than) << " | " << pair(v.ours_row, v.ours_than) << " | **"
       << v.verdict << "** | " << v.why << " |\n";
  }
  return md.str();
}

}  // namespace flotilla::controller
