// The compare table as text: aligned for the console, GitHub Markdown, CSV
// and JSON; and the config diff. Numbers go through numbers.h, so they print
// with a decimal point in every locale.
#include <QDateTime>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "flotilla/controller/compare.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;

const std::string kNone = "—";

// Display width: "—" and "±" are one column each but several bytes.
size_t width_of(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text)
    if ((c & 0xC0) != 0x80) ++width;
  return width;
}

std::string pad(const std::string& text, size_t width, bool right) {
  const size_t w = width_of(text);
  if (w >= width) return text;
  const std::string fill(width - w, ' ');
  return right ? fill + text : text + fill;
}

std::string markdown_escape(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string iso_time(int64_t ms) {
  return QDateTime::fromMSecsSinceEpoch(ms).toString(Qt::ISODate).toStdString();
}

void flatten(const json& value, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, child] : value.items())
      flatten(child, prefix.empty() ? key : prefix + "." + key, out);
    return;
  }
  out[prefix] = value.is_string() ? value.get<std::string>() : value.dump();
}

// Rows of text cells: the header, then one per run.
struct TextGrid {
  std::vector<std::string> header;
  std::vector<bool> numeric;
  std::vector<std::vector<std::string>> rows;
};

std::string aligned(const TextGrid& grid) {
  std::vector<size_t> widths(grid.header.size(), 0);
  for (size_t c = 0; c < grid.header.size(); ++c) {
    widths[c] = width_of(grid.header[c]);
    for (const auto& row : grid.rows) widths[c] = std::max(widths[c], width_of(row[c]));
  }
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c)
      text += (c ? "  " : "") + pad(cells[c], widths[c], grid.numeric[c]);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  line(grid.header);
  for (const auto& row : grid.rows) line(row);
  return out.str();
}

std::string markdown(const TextGrid& grid) {
  std::ostringstream out;
  out << "|";
  for (const auto& h : grid.header) out << " " << markdown_escape(h) << " |";
  out << "\n|";
  for (size_t c = 0; c < grid.header.size(); ++c) out << (grid.numeric[c] ? " ---: |" : " --- |");
  out << "\n";
  for (const auto& row : grid.rows) {
    out << "|";
    for (const auto& cell : row) out << " " << markdown_escape(cell) << " |";
    out << "\n";
  }
  return out.str();
}

TextGrid summary_grid(const CompareTable& table) {
  TextGrid grid;
  for (const auto& key : table.columns) {
    const auto* column = find_compare_column(key);
    grid.header.push_back(column ? column->header : key);
    grid.numeric.push_back(column && column->decimals >= 0);
  }
  for (const auto& row : table.rows) {
    std::vector<std::string> cells;
    for (const auto& key : table.columns) cells.push_back(cell_text(table, row, key));
    grid.rows.push_back(std::move(cells));
  }
  return grid;
}

TextGrid diff_grid(const CompareTable& table) {
  TextGrid grid;
  grid.header.push_back("config key");
  grid.numeric.push_back(false);
  for (const auto& row : table.rows) {
    grid.header.push_back(row.run.id);
    grid.numeric.push_back(false);
  }
  const auto& diff = table.config_diff;
  for (size_t k = 0; k < diff.keys.size(); ++k) {
    std::vector<std::string> cells{diff.keys[k]};
    cells.insert(cells.end(), diff.values[k].begin(), diff.values[k].end());
    grid.rows.push_back(std::move(cells));
  }
  return grid;
}

json cell_json(const CompareRow& row, const std::string& key) {
  const auto it = row.cells.find(key);
  if (it == row.cells.end() || it->second.empty()) return nullptr;
  if (it->second.number) return *it->second.number;
  return it->second.text;
}

std::string to_json_text(const CompareTable& table) {
  json columns = json::array();
  for (const auto& key : table.columns) {
    const auto* c = find_compare_column(key);
    columns.push_back(
        {{"key", key}, {"header", c ? c->header : key}, {"definition", c ? c->definition : ""}});
  }
  json rows = json::array();
  for (const auto& row : table.rows) {
    json values = json::object();
    for (const auto& key : table.columns) values[key] = cell_json(row, key);
    rows.push_back({{"run", row.run.id},
                    {"state", name_of(row.run.state)},
                    {"live", row.live},
                    {"baseline", row.baseline},
                    {"notes", row.notes},
                    {"peak_memory_source", name_of(row.stats.memory_source)},
                    {"values", values}});
  }
  json diff = json::object();
  for (size_t k = 0; k < table.config_diff.keys.size(); ++k)
    diff[table.config_diff.keys[k]] = table.config_diff.values[k];
  std::vector<std::string> runs;
  for (const auto& row : table.rows) runs.push_back(row.run.id);
  return json{{"as_of_ms", table.as_of_ms},
              {"baseline", table.rows.empty() ? "" : table.rows[table.baseline].run.id},
              {"runs", runs},
              {"columns", columns},
              {"rows", rows},
              {"config_diff", diff},
              {"warnings", table.warnings}}
      .dump(2);
}

}  // namespace

ConfigDiff config_diff(const std::vector<std::string>& config_jsons) {
  std::vector<std::map<std::string, std::string>> flat(config_jsons.size());
  std::set<std::string> keys;
  for (size_t i = 0; i < config_jsons.size(); ++i) {
    const auto j = json::parse(config_jsons[i], nullptr, false);
    if (!j.is_discarded()) flatten(j, "", flat[i]);
    for (const auto& [key, value] : flat[i]) keys.insert(key);
  }
  ConfigDiff diff;
  for (const auto& key : keys) {
    std::vector<std::string> values;
    for (const auto& config : flat) {
      const auto it = config.find(key);
      values.push_back(it == config.end() ? kNone : it->second);
    }
    if (std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end())
      continue;
    diff.keys.push_back(key);
    diff.values.push_back(std::move(values));
  }
  return diff;
}

std::optional<CompareFormat> compare_format_from_name(std::string_view name) {
  if (name == "table") return CompareFormat::table;
  if (name == "markdown") return CompareFormat::markdown;
  if (name == "csv") return CompareFormat::csv;
  if (name == "json") return CompareFormat::json;
  return std::nullopt;
}

std::string cell_text(const CompareTable&, const CompareRow& row, const std::string& key) {
  const auto it = row.cells.find(key);
  if (it == row.cells.end() || it->second.empty()) return kNone;
  if (!it->second.number) return it->second.text;
  const auto* column = find_compare_column(key);
  return format_fixed(*it->second.number, column ? std::max(0, column->decimals) : 3);
}

std::string format_config_diff(const CompareTable& table, CompareFormat format) {
  if (table.config_diff.keys.empty())
    return table.rows.size() > 1 ? "The runs' configs are identical.\n" : "";
  if (format == CompareFormat::markdown) return markdown(diff_grid(table));
  if (format == CompareFormat::json || format == CompareFormat::csv) {
    std::ostringstream out;
    out << "key";
    for (const auto& row : table.rows) out << "," << csv_field(row.run.id);
    out << "\n";
    for (size_t k = 0; k < table.config_diff.keys.size(); ++k) {
      out << csv_field(table.config_diff.keys[k]);
      for (const auto& v : table.config_diff.values[k]) out << "," << csv_field(v);
      out << "\n";
    }
    return out.str();
  }
  return aligned(diff_grid(table));
}

std::string format_compare(const CompareTable& table, CompareFormat format) {
  switch (format) {
    case CompareFormat::json:
      return to_json_text(table) + "\n";
    case CompareFormat::csv: {
      std::ostringstream out;
      for (size_t c = 0; c < table.columns.size(); ++c)
        out << (c ? "," : "") << csv_field(table.columns[c]);
      out << "\n";
      for (const auto& row : table.rows) {
        for (size_t c = 0; c < table.columns.size(); ++c) {
          const auto it = row.cells.find(table.columns[c]);
          std::string text;
          if (it != row.cells.end())
            text = it->second.number ? format_number(*it->second.number) : it->second.text;
          out << (c ? "," : "") << csv_field(text);
        }
        out << "\n";
      }
      return out.str();
    }
    case CompareFormat::markdown:
    case CompareFormat::table: {
      const bool md = format == CompareFormat::markdown;
      std::ostringstream out;
      const auto grid = summary_grid(table);
      out << (md ? markdown(grid) : aligned(grid));
      out << "\n"
          << (md ? "Baseline: `" : "baseline: ") << table.rows[table.baseline].run.id
          << (md ? "`" : "") << "; numbers as of " << iso_time(table.as_of_ms) << "\n";
      for (const auto& w : table.warnings) out << (md ? "\n> " : "warning: ") << w << "\n";
      const auto diff = format_config_diff(table, format);
      if (!diff.empty())
        out << "\n" << (md ? "### Config diff\n\n" : "config diff (keys that differ):\n") << diff;
      return out.str();
    }
  }
  return {};
}

}  // namespace flotilla::controller
