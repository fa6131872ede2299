// The seed's table beside the study's: parsed from NAME.seed.csv, matched to
// the study's runs by axis values, and written as "Seed vs ours".
#include "flotilla/controller/seed_table.h"

#include <QFile>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flotilla/controller/compare.h"
#include "flotilla/protocol/config_keys.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;

// One CSV line's cells (RFC 4180 quoting; a quoted cell does not span lines).
std::vector<std::string> cells_of(const std::string& line, const std::string& where) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      cells.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  if (quoted) throw ConfigError({where + ": a quote is left open"});
  return cells;
}

// Whether a point's value (JSON) is the seed's cell: numbers as numbers.
bool same_value(const std::string& value_json, const std::string& cell) {
  const auto value = json::parse(value_json, nullptr, false);
  if (value.is_number()) {
    const auto wanted = parse_number(cell);
    return wanted && std::abs(value.get<double>() - *wanted) <= 1e-9 * std::abs(*wanted);
  }
  if (value.is_string()) return value.get<std::string>() == cell;
  return value_text(value_json) == cell;
}

std::string shown(std::optional<double> value, int decimals = 3) {
  return value ? format_fixed(*value, decimals) : "—";
}

}  // namespace

SeedTable parse_seed_table(const std::string& csv_text, const std::string& source) {
  SeedTable table;
  std::istringstream lines(csv_text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = source + " line " + std::to_string(number);
    auto cells = cells_of(line, where);
    if (table.keys.empty()) {
      table.keys = std::move(cells);
      continue;
    }
    if (cells.size() != table.keys.size())
      throw ConfigError({where + ": expected " + std::to_string(table.keys.size()) +
                         " cells as the header has, got " + std::to_string(cells.size())});
    table.rows.push_back(std::move(cells));
  }
  if (table.rows.empty())
    throw ConfigError({source + ": expected a header of keys and at least one row"});
  return table;
}

std::optional<SeedTable> carried_seed_table(const SweepSpec& spec) {
  if (spec.report.seed.empty()) return std::nullopt;
  const auto name = spec.report.seed + ".seed.csv";
  QFile file(QString::fromStdString(":/studies/" + name));
  if (!file.open(QIODevice::ReadOnly))
    throw ConfigError({"report.seed: no seed table \"" + name +
                       "\" is carried (known: the "
                       "studies' own, flotilla study list)"});
  return parse_seed_table(file.readAll().toStdString(), name);
}

SeedComparison compare_with_seed(const SeedTable& seed, const SweepSpec& spec,
                                 const StudyTable& table,
                                 const std::vector<SweepPointRow>& points) {
  SeedComparison out;
  std::vector<size_t> match_at, column_at;
  std::vector<std::string> problems;
  for (size_t k = 0; k < seed.keys.size(); ++k) {
    const auto& key = seed.keys[k];
    const bool axis = std::any_of(spec.axes.begin(), spec.axes.end(),
                                  [&](const SweepAxis& a) { return a.key == key; });
    if (axis || find_config_key(key)) {
      out.match_keys.push_back(key), match_at.push_back(k);
    } else if (find_compare_column(key)) {
      out.columns.push_back(key), column_at.push_back(k);
    } else {
      problems.push_back("seed table: \"" + key +
                         "\" is neither an axis or config key of the study nor a compare column");
    }
  }
  if (!problems.empty()) throw ConfigError(problems);

  for (const auto& seed_row : seed.rows) {
    SeedComparisonRow row;
    for (size_t k : match_at) row.match.push_back(seed_row[k]);
    std::vector<size_t> matched;  // rows of the study table
    for (size_t i = 0; i < table.runs.size(); ++i) {
      const auto point = std::find_if(points.begin(), points.end(), [&](const SweepPointRow& p) {
        return p.run_id == table.runs[i];
      });
      if (point == points.end()) continue;
      bool same = true;
      for (size_t m = 0; m < match_at.size() && same; ++m)
        same = same_value(
            point_value_json(spec, point->values_json, point->config_json, out.match_keys[m]),
            row.match[m]);
      if (same) matched.push_back(i);
    }
    for (size_t c = 0; c < column_at.size(); ++c) {
      SeedFigure figure{out.columns[c], parse_number(seed_row[column_at[c]]), {}, {}};
      double sum = 0;
      int count = 0;
      for (size_t i : matched) {
        const auto& cells = table.compare.rows[i].cells;
        const auto cell = cells.find(figure.column);
        if (cell != cells.end() && cell->second.number) sum += *cell->second.number, ++count;
      }
      if (count > 0) figure.ours = sum / count;
      if (figure.ours && figure.seed && *figure.seed != 0)
        figure.ratio = *figure.ours / *figure.seed;
      row.figures.push_back(figure);
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

std::string seed_comparison_markdown(const SeedComparison& comparison) {
  std::ostringstream md;
  md << "|";
  for (const auto& key : comparison.match_keys) md << " " << key << " |";
  for (const auto& column : comparison.columns) {
    const auto* c = find_compare_column(column);
    const std::string header = c ? c->header : column;
    md << " " << header << ": seed | ours | ours/seed |";
  }
  md << "\n|";
  for (size_t i = 0; i < comparison.match_keys.size() + 3 * comparison.columns.size(); ++i)
    md << " --- |";
  md << "\n";
  for (const auto& row : comparison.rows) {
    md << "|";
    for (const auto& value : row.match) md << " " << value << " |";
    for (const auto& f : row.figures)
      md << " " << shown(f.seed) << " | " << shown(f.ours) << " | " << shown(f.ratio, 2) << " |";
    md << "\n";
  }
  return md.str();
}

std::string seed_comparison_csv(const SeedComparison& comparison) {
  std::ostringstream csv;
  csv.precision(17);
  std::vector<std::string> header = comparison.match_keys;
  for (const auto& column : comparison.columns)
    for (const char* side : {"seed", "ours", "ratio"}) header.push_back(column + " " + side);
  for (size_t i = 0; i < header.size(); ++i) csv << (i ? "," : "") << header[i];
  csv << "\n";
  for (const auto& row : comparison.rows) {
    bool first = true;
    for (const auto& value : row.match) csv << (first ? "" : ",") << value, first = false;
    for (const auto& f : row.figures)
      for (const auto& v : {f.seed, f.ours, f.ratio}) {
        csv << (first ? "" : ",");
        if (v) csv << format_fixed(*v, 12);
        first = false;
      }
    csv << "\n";
  }
  return csv.str();
}

}  // namespace flotilla::controller
