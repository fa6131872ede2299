#include "flotilla/controller/study_chart.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "flotilla/controller/compare.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;

// A series key's value as the legend shows it: a label as itself, a number
// with its key ("batch_size 32"). Numbers the same in every locale (the CLI
// runs in the user's).
std::string legend_part(const std::string& key, const std::string& text) {
  if (const auto number = parse_number(text)) return key + " " + format_number(*number);
  return text;
}

// One point of the chart: x as text and, when numeric, as a number.
struct Key {
  std::string line, x;
  bool operator<(const Key& other) const {
    return std::tie(line, x) < std::tie(other.line, other.x);
  }
};

struct Sum {
  std::optional<double> x_value;
  double y = 0;
  int count = 0;
  bool oom = false;
  size_t order = 0;  // first seen: lines and categories keep the table's order
};

json line_json(const std::string& name, bool seed, const std::map<Key, Sum>& sums,
               const std::vector<std::string>& line_order) {
  json lines = json::array();
  for (const auto& line : line_order) {
    json points = json::array();
    std::vector<std::pair<size_t, json>> ordered;
    for (const auto& [key, sum] : sums) {
      if (key.line != line) continue;
      json point;
      point["x"] = sum.x_value ? json(*sum.x_value) : json(key.x);
      point["y"] = sum.count > 0 ? json(sum.y / sum.count) : json(nullptr);
      if (sum.oom) point["oom"] = true;
      ordered.emplace_back(sum.order, point);
    }
    std::sort(ordered.begin(), ordered.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [order, point] : ordered) points.push_back(std::move(point));
    lines.push_back({{"name", line.empty() ? name : line},
                     {"source", seed ? "seed" : "ours"},
                     {"points", points}});
  }
  return lines;
}

}  // namespace

StudyChart study_chart(const SweepSpec& spec, const StudyTable& table,
                       const std::vector<SweepPointRow>& points,
                       const std::optional<SeedTable>& seed) {
  const auto& chart = spec.report.chart;
  const auto* y_column = find_compare_column(chart.y);
  if (!y_column)
    throw ConfigError({"report.chart.y: \"" + chart.y +
                       "\" is not a compare column (docs/compare.md: speedup, throughput, "
                       "peak_mem_mib, acc_test_pct, sent_mb, ...)"});
  const bool numeric_x = [&] {
    for (const auto& point : points) {
      const auto value = json::parse(
          point_value_json(spec, point.values_json, point.config_json, chart.x), nullptr, false);
      // A variant's label that is a number ("0" frozen blocks) is one too.
      if (!value.is_number() && !(value.is_string() && parse_number(value.get<std::string>())))
        return false;
    }
    return true;
  }();

  // Ours: the study table's runs, by line and x, averaged over repeats.
  std::map<Key, Sum> ours;
  std::vector<std::string> our_lines;
  size_t order = 0;
  for (size_t i = 0; i < table.runs.size(); ++i) {
    const auto point = std::find_if(points.begin(), points.end(), [&](const SweepPointRow& p) {
      return p.run_id == table.runs[i];
    });
    if (point == points.end()) continue;
    const auto value_of = [&](const std::string& key) {
      return value_text(point_value_json(spec, point->values_json, point->config_json, key));
    };
    std::string line;
    for (const auto& key : chart.series)
      line += (line.empty() ? "" : ", ") + legend_part(key, value_of(key));
    const std::string x = value_of(chart.x);
    auto [at, fresh] = ours.try_emplace(Key{line, x});
    if (fresh)
      at->second.order = order++, at->second.x_value = numeric_x ? parse_number(x) : std::nullopt;
    if (std::find(our_lines.begin(), our_lines.end(), line) == our_lines.end())
      our_lines.push_back(line);
    const auto& row = table.compare.rows[i];
    if (row.run.state == RunState::oom) at->second.oom = true;
    const auto cell = row.cells.find(chart.y);
    if (cell != row.cells.end() && cell->second.number)
      at->second.y += *cell->second.number, ++at->second.count;
  }

  // The seed's: its rows that have x, in its table's order.
  std::map<Key, Sum> theirs;
  std::vector<std::string> seed_lines;
  if (seed) {
    const auto column = [&](const std::string& key) -> std::optional<size_t> {
      const auto it = std::find(seed->keys.begin(), seed->keys.end(), key);
      if (it == seed->keys.end()) return std::nullopt;
      return size_t(it - seed->keys.begin());
    };
    const auto x_at = column(chart.x), y_at = column(chart.y);
    if (x_at && y_at) {
      for (const auto& row : seed->rows) {
        if (row[*x_at].empty()) continue;
        std::string line;
        for (const auto& key : chart.series)
          if (const auto at = column(key))
            line += (line.empty() ? "" : ", ") + legend_part(key, row[*at]);
        const auto x_value = parse_number(row[*x_at]);
        const std::string x = x_value ? format_number(*x_value) : row[*x_at];
        if (numeric_x && !x_value) continue;  // a seed row ours cannot place
        auto [at, fresh] = theirs.try_emplace(Key{line, x});
        if (fresh)
          at->second.order = order++, at->second.x_value = numeric_x ? x_value : std::nullopt;
        if (std::find(seed_lines.begin(), seed_lines.end(), line) == seed_lines.end())
          seed_lines.push_back(line);
        std::string cell = row[*y_at];
        for (char& c : cell) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (cell == "OOM") at->second.oom = true;
        if (const auto y = parse_number(row[*y_at])) at->second.y += *y, ++at->second.count;
      }
    }
  }

  StudyChart result;
  result.title = chart.title.empty() ? y_column->header + " against " + chart.x : chart.title;
  for (const auto& [key, sum] : theirs) result.seed_points += sum.count > 0 || sum.oom ? 1 : 0;
  for (const auto& [key, sum] : ours) result.our_points += sum.count > 0 || sum.oom ? 1 : 0;
  json out;
  out["title"] = result.title;
  out["x_label"] = chart.x;
  out["y_label"] = y_column->header;
  // Without series keys ours and the seed's are one line each, of one name:
  // the figure's.
  out["series"] = line_json(y_column->header, false, ours, our_lines);
  for (auto& line : line_json(y_column->header, true, theirs, seed_lines))
    out["series"].push_back(line);
  result.json = out.dump(1);
  return result;
}

}  // namespace flotilla::controller
