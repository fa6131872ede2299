#include "flotilla/controller/sweep_report.h"

#include <QString>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "flotilla/controller/run_summary.h"

namespace flotilla::controller {
namespace {

using nlohmann::ordered_json;

std::string first_line(const std::string& text, size_t limit) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > limit) line = line.substr(0, limit - 3) + "...";
  return line;
}

std::string seed_of(const SweepPointRow& point) {
  const auto config = nlohmann::json::parse(point.config_json, nullptr, false);
  if (!config.is_object() || !config.contains("seed")) return "-";
  return config["seed"].dump();
}

std::string csv_cell(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string out = "\"";
  for (char c : cell) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string markdown_cell(const std::string& cell) {
  std::string out;
  for (char c : first_line(cell, 1000)) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::optional<double> run_throughput(const Store& store, const std::string& run) {
  const auto row = store.run(run);
  if (!row) return std::nullopt;
  const auto summary = summarize(*row, store.records(run));
  if (summary.steps == 0 || summary.samples_per_s <= 0) return std::nullopt;
  return summary.samples_per_s;
}

std::string point_values_text(const std::string& values_json) {
  const auto values = ordered_json::parse(values_json, nullptr, false);
  if (!values.is_object()) return values_json;
  std::string out;
  for (const auto& [key, value] : values.items())
    out += (out.empty() ? "" : ", ") + key + " " + value_text(value.dump());
  return out;
}

TextTable sweep_table(const SweepSpec& spec, const std::vector<SweepPointRow>& points,
                      const Store* store) {
  TextTable table;
  table.columns.push_back("#");
  for (const auto& axis : spec.axes) table.columns.push_back(axis.key);
  if (spec.repeat > 1) table.columns.push_back("seed");
  table.columns.push_back("state");
  if (store) {
    table.columns.push_back("run");
    table.columns.push_back("samples/s");
  }
  table.columns.push_back("reason");
  for (const auto& point : points) {
    std::vector<std::string> row{std::to_string(point.index + 1)};
    const auto values = ordered_json::parse(point.values_json, nullptr, false);
    for (const auto& axis : spec.axes)
      row.push_back(values.is_object() && values.contains(axis.key)
                        ? value_text(values[axis.key].dump())
                        : "-");
    if (spec.repeat > 1) row.push_back(seed_of(point));
    row.push_back(std::string(name_of(point.state)));
    if (store) {
      row.push_back(point.run_id.empty() ? "-" : point.run_id);
      const auto throughput =
          point.run_id.empty() ? std::nullopt : run_throughput(*store, point.run_id);
      row.push_back(throughput ? QString::number(*throughput, 'f', 1).toStdString() : "-");
    }
    row.push_back(point.reason);
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string render_table(const TextTable& table, std::string_view format) {
  std::string out;
  if (format == "csv") {
    for (size_t c = 0; c < table.columns.size(); ++c)
      out += (c ? "," : "") + csv_cell(table.columns[c]);
    out += "\n";
    for (const auto& row : table.rows) {
      for (size_t c = 0; c < row.size(); ++c) out += (c ? "," : "") + csv_cell(row[c]);
      out += "\n";
    }
    return out;
  }
  if (format == "markdown") {
    auto line = [](const std::vector<std::string>& cells) {
      std::string l = "|";
      for (const auto& cell : cells) l += " " + markdown_cell(cell) + " |";
      return l + "\n";
    };
    out += line(table.columns);
    out += line(std::vector<std::string>(table.columns.size(), "---"));
    for (const auto& row : table.rows) out += line(row);
    return out;
  }
  // An aligned table; the last column (the reason) is left ragged.
  std::vector<std::vector<std::string>> cells{table.columns};
  for (const auto& row : table.rows) {
    auto shown = row;
    if (!shown.empty()) shown.back() = first_line(shown.back(), 70);
    cells.push_back(std::move(shown));
  }
  std::vector<size_t> widths(table.columns.size(), 0);
  for (const auto& row : cells)
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  for (const auto& row : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string sweep_json(const Store& store, const SweepRow& sweep, const SweepSpec& spec,
                       const std::vector<SweepPointRow>& points) {
  const auto progress = progress_of(points);
  ordered_json out;
  out["sweep"] = {{"name", sweep.name},
                  {"state", name_of(sweep.state)},
                  {"reason", sweep.reason},
                  {"source", sweep.source},
                  {"created_ms", sweep.created_ms},
                  {"ended_ms", sweep.ended_ms ? ordered_json(*sweep.ended_ms) : ordered_json()},
                  {"repeat", spec.repeat},
                  {"axes", ordered_json::array()}};
  for (const auto& axis : spec.axes)
    out["sweep"]["axes"].push_back({{"key", axis.key}, {"until_oom", axis.until_oom}});
  out["progress"] = {{"points", progress.total},    {"finished", progress.finished},
                     {"failed", progress.failed},   {"oom", progress.oom},
                     {"killed", progress.killed},   {"skipped", progress.skipped},
                     {"refused", progress.refused}, {"queued", progress.queued},
                     {"running", progress.running}};
  out["points"] = ordered_json::array();
  for (const auto& point : points) {
    const auto throughput =
        point.run_id.empty() ? std::nullopt : run_throughput(store, point.run_id);
    out["points"].push_back(
        {{"index", point.index + 1},
         {"values", ordered_json::parse(point.values_json, nullptr, false)},
         {"repeat", point.repeat},
         {"state", name_of(point.state)},
         {"run", point.run_id.empty() ? ordered_json() : ordered_json(point.run_id)},
         {"samples_per_s", throughput ? ordered_json(*throughput) : ordered_json()},
         {"reason", point.reason}});
  }
  return out.dump(2);
}

}  // namespace flotilla::controller
