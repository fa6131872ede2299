#include "flotilla/controller/study.h"

#include "flotilla/controller/seed_findings.h"
#include "flotilla/controller/seed_table.h"

#include <QDir>
#include <QFile>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "flotilla/controller/kept_runs.h"
#include "flotilla/controller/paths.h"
#include "flotilla/controller/run_prediction.h"
#include "flotilla/controller/study_chart.h"
#include "flotilla/controller/sweep_report.h"
#include "flotilla/protocol/config_keys.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;

const char* kStudyPrefix = ":/studies/";
const std::vector<std::string> kScales{"cpu", "gpu", "gpu1"};

bool is_file_name(const std::string& name) {
  for (const char* ext : {".yaml", ".yml", ".json"}) {
    const std::string e(ext);
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0)
      return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

bool is_axis(const SweepSpec& spec, const std::string& key) {
  return std::any_of(spec.axes.begin(), spec.axes.end(),
                     [&](const SweepAxis& axis) { return axis.key == key; });
}

// The report's columns, or every axis and the default compare columns.
std::vector<std::string> columns_of(const SweepSpec& spec) {
  if (!spec.report.columns.empty()) return spec.report.columns;
  std::vector<std::string> columns;
  for (const auto& axis : spec.axes) columns.push_back(axis.key);
  for (const auto& key : default_compare_columns()) columns.push_back(key);
  return columns;
}

// `i`: the key's place among the study's columns (past the end: not one of them).
std::string header_of(const SweepSpec& spec, size_t i, const std::string& key) {
  if (i < spec.report.headers.size() && !spec.report.headers[i].empty())
    return spec.report.headers[i];
  if (key == kSentRatioColumn) return "sent ratio";
  if (const auto* column = find_compare_column(key); column && !is_axis(spec, key))
    return column->header;
  return key;
}

// The compare columns the study needs beyond the default ones, appended.
std::vector<std::string> compare_columns_for(const SweepSpec& spec) {
  auto columns = default_compare_columns();
  for (const auto& key : columns_of(spec))
    if (!is_axis(spec, key) && find_compare_column(key) &&
        std::find(columns.begin(), columns.end(), key) == columns.end())
      columns.push_back(key);
  if (std::find(columns.begin(), columns.end(), "sent_mb") == columns.end())
    columns.push_back("sent_mb");  // what sent_ratio divides
  const auto& y = spec.report.chart.y;
  if (!y.empty() && find_compare_column(y) &&
      std::find(columns.begin(), columns.end(), y) == columns.end())
    columns.push_back(y);  // what the chart draws
  return columns;
}

bool values_match(const SweepSpec& spec, const SweepPointRow& point,
                  const json& wanted /* an object */) {
  for (const auto& [key, value] : wanted.items()) {
    const auto have = json::parse(point_value_json(spec, point.values_json, point.config_json, key),
                                  nullptr, false);
    if (have != value) return false;
  }
  return true;
}

std::string group_key(const SweepSpec& spec, const SweepPointRow& point) {
  std::string key;
  for (const auto& name : spec.report.group_by)
    key += point_value_json(spec, point.values_json, point.config_json, name) + "\n";
  return key;
}

std::string rule_of(const SweepSpec& spec) {
  std::string rule = "Speed-up and the other derived columns are relative to ";
  const std::string which =
      spec.report.baseline_json.empty()
          ? "the first run"
          : "the first run with " + point_values_text(spec.report.baseline_json);
  if (spec.report.group_by.empty()) return rule + which + " of the sweep.";
  return rule + which + " among the runs of equal " + joined(spec.report.group_by) +
         " (each group its own baseline, marked `baseline` in the notes).";
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : c == '\n' ? " " : std::string(1, c);
  return out;
}

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// `text` into `file`, whole, or an exception naming the file.
void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!(out << text) || !out.flush()) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace

std::vector<std::string> study_names() {
  std::set<std::string> names;
  for (const auto& file : QDir(kStudyPrefix).entryList(QDir::Files)) {
    const auto name = file.toStdString();
    const auto dot = name.find('.');
    if (dot != std::string::npos) names.insert(name.substr(0, dot));
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> study_scales(const std::string& study) {
  std::vector<std::string> scales;
  for (const auto& scale : kScales)
    if (QFile::exists(QString::fromStdString(kStudyPrefix + study + "." + scale + ".yaml")))
      scales.push_back(scale);
  return scales;
}

std::vector<std::string> study_report_problems(const SweepSpec& spec) {
  std::vector<std::string> problems;
  for (const auto& key : spec.report.columns) {
    if (is_axis(spec, key) || key == kSentRatioColumn || find_compare_column(key) ||
        find_config_key(key))
      continue;
    std::vector<std::string> axes;
    for (const auto& axis : spec.axes) axes.push_back(axis.key);
    problems.push_back("report.columns: unknown column \"" + key + "\"; give an axis (" +
                       joined(axes) + "), " + kSentRatioColumn +
                       ", a compare column (docs/compare.md: run, ranks, batch, throughput, "
                       "speedup, epoch_s, ...) or a config key (optimizer.lr, ...)");
  }
  if (const auto& y = spec.report.chart.y; !y.empty() && !find_compare_column(y))
    problems.push_back("report.chart.y: \"" + y +
                       "\" is not a compare column (docs/compare.md: speedup, throughput, "
                       "peak_mem_mib, acc_test_pct, sent_mb, ...)");
  // The seed table, refused before anything runs rather than after.
  try {
    if (const auto seed = carried_seed_table(spec)) {
      for (const auto& key : seed->keys)
        if (!is_axis(spec, key) && !find_config_key(key) && !find_compare_column(key))
          problems.push_back("report.seed: " + spec.report.seed + ".seed.csv's \"" + key +
                             "\" is neither an axis or config key of the study nor a compare "
                             "column");
      carried_seed_findings(spec, *seed);
    }
  } catch (const ConfigError& e) {
    problems.insert(problems.end(), e.problems().begin(), e.problems().end());
  }
  return problems;
}

SweepSpec load_study(const std::string& name, const std::string& scale) {
  SweepSpec spec;
  if (is_file_name(name)) {
    spec = load_sweep(name);
  } else {
    if (std::find(kScales.begin(), kScales.end(), scale) == kScales.end())
      throw ConfigError({"--scale: expected cpu, gpu or gpu1, got \"" + scale + "\""});
    const auto names = study_names();
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw ConfigError({"study: no study \"" + name + "\" (known: " + joined(names) +
                         "; or give a sweep file ending in .yaml)"});
    const std::string path = kStudyPrefix + name + "." + scale + ".yaml";
    QFile file(QString::fromStdString(path));
    if (!file.open(QIODevice::ReadOnly))
      throw ConfigError({"--scale: study \"" + name + "\" has no " + scale + " scale (it has " +
                         joined(study_scales(name)) + ")"});
    const auto text = file.readAll().toStdString();
    spec = parse_sweep(text, "study " + name + " (" + scale + ")", {}, name + "-" + scale);
  }
  if (auto problems = study_report_problems(spec); !problems.empty()) throw ConfigError(problems);
  return spec;
}

namespace {
// Where the study's runs were predicted first (`study run --predict`): each
// prediction and its error beside the measured column it predicts (after
// it, or at the end when the study's columns leave that one out).
std::vector<std::string> with_predicted_columns(std::vector<std::string> keys, bool throughput,
                                                bool memory) {
  const auto insert_after = [&](const std::string& measured, std::vector<std::string> added) {
    auto at = std::find(keys.begin(), keys.end(), measured);
    at = at == keys.end() ? keys.end() : std::next(at);
    keys.insert(at, added.begin(), added.end());
  };
  if (throughput) insert_after("throughput", {"predicted_throughput", "prediction_err_pct"});
  if (memory) insert_after("peak_mem_mib", {"predicted_peak_mem_mib", "peak_mem_err_pct"});
  return keys;
}
}  // namespace

StudyTable study_table(const Store& store, const SweepSpec& spec,
                       const std::vector<SweepPointRow>& points) {
  StudyTable out;
  out.baseline_rule = rule_of(spec);
  const json wanted =
      spec.report.baseline_json.empty() ? json::object() : json::parse(spec.report.baseline_json);
  // The points with a run, in point order, grouped; the rest listed.
  std::vector<const SweepPointRow*> ran;
  std::vector<std::string> groups;  // in order of first appearance
  std::map<std::string, std::vector<const SweepPointRow*>> members;
  for (const auto& point : points) {
    if (point.run_id.empty() || !store.run(point.run_id)) {
      out.not_run.push_back(
          "point " + std::to_string(point.index + 1) + " (" + point_values_text(point.values_json) +
          "): " + std::string(name_of(point.state)) +
          (point.reason.empty() ? "" : ": " + point.reason.substr(0, point.reason.find('\n'))));
      continue;
    }
    ran.push_back(&point);
    const auto key = group_key(spec, point);
    if (!members.count(key)) groups.push_back(key);
    members[key].push_back(&point);
  }
  if (ran.empty()) throw CompareError({"the sweep has no run yet: nothing to report"});
  bool predicted_throughput = false, predicted_memory = false;
  for (const auto* point : ran)
    if (const auto predicted = run_prediction(store, point->run_id)) {
      predicted_throughput = predicted_throughput || predicted->samples_per_s > 0;
      predicted_memory = predicted_memory || predicted->peak_memory_bytes > 0;
    }

  // One compare table per group, its baseline the group's first matching run.
  const auto columns =
      with_predicted_columns(compare_columns_for(spec), predicted_throughput, predicted_memory);
  std::map<std::string, CompareRow> rows;                      // by run
  std::map<std::string, std::optional<double>> baseline_sent;  // by run: its group's
  std::vector<std::string> warnings;
  CompareTable merged;
  merged.columns = columns;
  for (const auto& key : groups) {
    const auto& group = members[key];
    const SweepPointRow* base = group.front();
    bool matched = wanted.empty();
    for (const auto* point : group)
      if (!matched && values_match(spec, *point, wanted)) {
        base = point;
        matched = true;
      }
    if (!matched)
      warnings.push_back("no run with " + point_values_text(spec.report.baseline_json) +
                         " among the runs of point " + std::to_string(group.front()->index + 1) +
                         "'s group: its first run is their baseline");
    std::vector<std::string> runs;
    for (const auto* point : group) runs.push_back(point->run_id);
    CompareOptions options;
    options.baseline = base->run_id;
    options.columns = columns;
    auto table = compare_runs(store, runs, options);
    merged.as_of_ms = std::max(merged.as_of_ms, table.as_of_ms);
    for (auto& w : table.warnings)
      if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
    const auto base_sent = table.rows[table.baseline].cells["sent_mb"].number;
    for (auto& row : table.rows) {
      const auto id = row.run.id;
      baseline_sent[id] = base_sent;
      rows.emplace(id, std::move(row));
    }
  }

  const auto study_keys = columns_of(spec);
  const auto keys = with_predicted_columns(study_keys, predicted_throughput, predicted_memory);
  out.columns = keys;
  // A study's own headers go with its own columns, wherever predictions moved them.
  for (const auto& key : keys)
    out.headers.push_back(header_of(
        spec, std::find(study_keys.begin(), study_keys.end(), key) - study_keys.begin(), key));
  std::vector<std::string> configs;
  bool have_baseline = false;
  for (const auto* point : ran) {
    auto& row = rows.at(point->run_id);
    std::vector<std::string> cells;
    for (const auto& key : keys) {
      if (is_axis(spec, key)) {
        cells.push_back(
            value_text(point_value_json(spec, point->values_json, point->config_json, key)));
      } else if (key == kSentRatioColumn) {
        const auto sent = row.cells["sent_mb"].number;
        const auto base = baseline_sent[point->run_id];
        cells.push_back(sent && base && *base > 0 && row.run.state != RunState::oom
                            ? format_fixed(*sent / *base, 3)
                            : "—");
      } else if (find_compare_column(key)) {
        cells.push_back(cell_text(merged, row, key));
      } else {  // a config key
        const auto value = point_value_json(spec, point->values_json, point->config_json, key);
        cells.push_back(value == "null" ? "—" : value_text(value));
      }
    }
    out.rows.push_back(std::move(cells));
    out.runs.push_back(point->run_id);
    configs.push_back(row.run.config_json);
    if (row.baseline && !have_baseline) {
      merged.baseline = merged.rows.size();
      have_baseline = true;
    }
    merged.rows.push_back(std::move(row));
  }
  merged.config_diff = config_diff(configs);
  merged.warnings = std::move(warnings);
  if (!spec.report.group_by.empty())
    merged.warnings.insert(merged.warnings.begin(),
                           "each group of equal " + joined(spec.report.group_by) +
                               " has its own baseline (note `baseline`); the line below names "
                               "the first");
  out.compare = std::move(merged);
  return out;
}

std::string study_table_markdown(const StudyTable& table) {
  std::ostringstream md;
  md << "|";
  for (const auto& h : table.headers) md << " " << markdown_cell(h) << " |";
  md << "\n|";
  for (size_t i = 0; i < table.headers.size(); ++i) md << " --- |";
  md << "\n";
  for (const auto& row : table.rows) {
    md << "|";
    for (const auto& cell : row) md << " " << markdown_cell(cell) << " |";
    md << "\n";
  }
  return md.str();
}

std::string study_table_csv(const StudyTable& table) {
  std::ostringstream csv;
  for (size_t i = 0; i < table.headers.size(); ++i)
    csv << (i ? "," : "") << csv_cell(table.headers[i]);
  csv << "\n";
  for (const auto& row : table.rows) {
    for (size_t i = 0; i < row.size(); ++i)
      csv << (i ? "," : "") << csv_cell(row[i] == "—" ? "" : row[i]);
    csv << "\n";
  }
  return csv.str();
}

ReportResult write_study_report(Store& store, const SweepRow& sweep,
                                const StudyReportOptions& options) {
  const auto spec = parse_sweep(sweep.spec_json, "sweep " + sweep.name);
  const auto points = SweepStore(store).points(sweep.id);
  const auto table = study_table(store, spec, points);
  const auto progress = progress_of(points);

  std::ostringstream lead;
  // The seed's own numbers first, beside ours, made again with the report.
  std::optional<SeedComparison> seed;
  std::vector<FindingVerdict> verdicts;
  if (const auto carried = carried_seed_table(spec)) {
    seed = compare_with_seed(*carried, spec, table, points);
    verdicts = judge_findings(carried_seed_findings(spec, *carried), *seed);
    lead << "## Seed vs ours\n\n"
         << "The seed's published figures (`" << spec.report.seed
         << ".seed.csv`) beside this study's, matched on " << joined(seed->match_keys)
         << "; ours is the mean over the matching runs"
         << " (repeats), computed from `" << kStudyDatabase
         << "` as every figure below. The same in `seed_vs_ours.csv`, numbers in full. "
         << "The seed ran its own hardware and sizes (the study's file says what this scale "
            "changes): read shapes and ratios, not absolute times.\n\n"
         << seed_comparison_markdown(*seed) << "\n";
    if (!verdicts.empty())
      lead << "### The seed's findings\n\n"
           << "Each is an ordering the seed's table shows (`" << spec.report.seed
           << ".findings.csv`): it **agrees** when this study's figures keep the seed's order, "
              "**differs** when they do not, with the reason this scale may change it.\n\n"
           << findings_markdown(verdicts) << "\n";
  }
  // The study's chart in the seed's shape, before the long tables.
  std::error_code error;
  std::filesystem::create_directories(options.directory, error);
  std::optional<std::string> chart_problem;
  if (!spec.report.chart.empty()) {
    const auto chart = study_chart(spec, table, points, carried_seed_table(spec));
    const auto data = options.directory / "study_chart.json";
    write_text(data, chart.json);
    const auto image = options.directory / "study_chart.png";
    const auto renderer =
        options.renderer.empty() ? sibling_program("flotilla-gui") : options.renderer;
    chart_problem = chart.our_points + chart.seed_points == 0 ? "no run has a figure for it yet"
                    : std::filesystem::exists(renderer)
                        ? render_chart({renderer.string(), "--render-points", data.string(),
                                        "--size", "1000x560", "-o", image.string()},
                                       image, std::chrono::seconds(120))
                        : "the chart renderer " + renderer.string() + " is not there";
    lead << "## Chart\n\n";
    if (chart_problem->empty())
      lead << "![" << chart.title << "](study_chart.png)\n\n";
    else
      lead << "*(not drawn: " << *chart_problem << ")*\n\n";
    lead << (chart.seed_points > 0
                 ? "Filled markers and solid lines are this study's runs (the mean of repeats); "
                   "hollow markers and dashed lines the seed's published figures. "
                 : "")
         << "Its data is in `study_chart.json`.\n\n";
  }
  lead << "## Study table\n\n";
  if (!spec.description.empty()) lead << spec.description << ".\n\n";
  lead << "Sweep `" << sweep.name << "`: " << name_of(sweep.state) << "; " << progress.total
       << " point(s): " << progress.finished << " finished, " << progress.oom << " oom, "
       << progress.failed << " failed, " << progress.killed << " killed, " << progress.skipped
       << " skipped, " << progress.refused << " refused, " << progress.queued + progress.running
       << " not ended. One row per run, in the sweep's order; " << table.baseline_rule
       << " The same table is in `study.csv`.\n\n";
  lead << study_table_markdown(table);
  if (!table.not_run.empty()) {
    lead << "\nPoints without a run:\n\n";
    for (const auto& line : table.not_run) lead << "- " << line << "\n";
  }
  // The study's runs stay beside the report: its numbers can be recomputed
  // from their records, and the report written again, once the database
  // they ran in is gone.
  keep_runs(store, table.runs, sweep.id, options.directory / kStudyDatabase);
  // A blank line first: a line right under a table would be read as its row.
  lead << "\nIts runs are kept beside this report in `" << kStudyDatabase
       << "` (records, states, the sweep): `flotilla --db " << kStudyDatabase << " study report "
       << sweep.name << " -o .` writes it again.\n\n";

  ReportOptions report;
  report.directory = options.directory;
  report.database = options.database;
  report.database_named = kStudyDatabase;
  report.renderer = options.renderer;
  report.title = "Study " + sweep.name;
  report.command = options.command;
  report.lead_markdown = lead.str();
  auto result = write_report(table.compare, report);
  if (chart_problem && chart_problem->empty())
    result.images.insert(result.images.begin(), options.directory / "study_chart.png");
  else if (chart_problem)
    result.problems.insert(result.problems.begin(), "chart: " + *chart_problem);
  write_text(options.directory / "study.csv", study_table_csv(table));
  if (seed) write_text(options.directory / "seed_vs_ours.csv", seed_comparison_csv(*seed));
  return result;
}

}  // namespace flotilla::controller
