#include "cli_compare.h"

#include <QFileInfo>

#include <iostream>
#include <regex>

#include "exit_status.h"
#include "flotilla/controller/compare.h"
#include "flotilla/controller/report.h"
#include "flotilla/protocol/experiment_config.h"

namespace flotilla::controller {
namespace {

int bad_input(const std::string& command, const std::vector<std::string>& problems) {
  std::cerr << "flotilla " << command << ":";
  if (problems.size() == 1) {
    std::cerr << " " << problems.front() << "\n";
  } else {
    std::cerr << "\n";
    for (const auto& p : problems) std::cerr << "  " << p << "\n";
  }
  return kExitBadInput;
}

// The runs named, or those of --experiment; both together are an error.
std::vector<std::string> chosen_runs(const Store& store, const CompareCommands& c) {
  if (!c.experiment.empty() && !c.runs.empty())
    throw CompareError({"name runs or --experiment, not both"});
  if (!c.experiment.empty()) return runs_of_experiment(store, c.experiment);
  return c.runs;
}

CompareOptions options_of(const CompareCommands& c) {
  CompareOptions options;
  if (!c.baseline.empty()) options.baseline = c.baseline;
  options.columns = split_list(c.columns);
  return options;
}

int command_compare(const Store& store, const CompareCommands& c) {
  const auto format = compare_format_from_name(c.format);
  const auto table = compare_runs(store, chosen_runs(store, c), options_of(c));
  std::cout << format_compare(table, *format);
  return kExitDone;
}

int command_report(const Store& store, const CompareCommands& c) {
  if (c.output.empty()) return bad_input("report", {"-o DIR: the report's directory is required"});
  if (!std::regex_match(c.size, std::regex("[1-9][0-9]{1,4}x[1-9][0-9]{1,4}")))
    return bad_input("report", {"--size: expected WIDTHxHEIGHT in pixels, e.g. 1000x500, got \"" +
                                c.size + "\""});
  const auto table = compare_runs(store, chosen_runs(store, c), options_of(c));
  ReportOptions options;
  options.directory = c.output;
  options.database = QFileInfo(store.path()).absoluteFilePath().toStdString();
  if (!c.experiment.empty()) options.title = c.experiment;
  options.panels = split_list(c.panels);
  options.size = c.size;
  const auto result = write_report(table, options);
  std::cout << "wrote " << result.markdown.string() << " (" << result.images.size() << " of "
            << options.panels.size() << " charts) and " << result.csv.string() << "\n";
  for (const auto& problem : result.problems)
    std::cerr << "flotilla report: chart " << problem << "\n";
  return result.problems.empty() ? kExitDone : kExitFailed;
}

}  // namespace

void add_compare_commands(CLI::App& app, CompareCommands& c) {
  c.compare = app.add_subcommand(
      "compare", "runs side by side: throughput, step time, bytes, memory, speed-up, efficiency");
  c.report = app.add_subcommand(
      "report", "write DIR/report.md (table, config diff, charts) and DIR/summary.csv");
  for (auto* command : {c.compare, c.report}) {
    command->add_option("runs", c.runs, "run ids (the first is the baseline unless --baseline)");
    command->add_option("--experiment", c.experiment, "every run of this experiment instead");
    command->add_option("--baseline", c.baseline,
                        "the run speed-up and efficiency are relative to");
    command->add_option("--columns", c.columns,
                        "comma-separated column keys (docs/compare.md; default: the usual set)");
  }
  c.compare->add_option("--format", c.format, "table, markdown, csv or json")
      ->check(CLI::IsMember({"table", "markdown", "csv", "json"}))
      ->capture_default_str();
  c.report->add_option("-o,--output", c.output, "the report's directory (created if missing)");
  c.report->add_option("--panels", c.panels, "charts to draw, comma-separated")
      ->capture_default_str();
  c.report->add_option("--size", c.size, "each chart's size in pixels, WxH")->capture_default_str();
}

std::optional<int> run_compare_commands(Store& store, const CompareCommands& c) {
  const bool compare = c.compare && *c.compare, report = c.report && *c.report;
  if (!compare && !report) return std::nullopt;
  try {
    return compare ? command_compare(store, c) : command_report(store, c);
  } catch (const CompareError& e) {
    return bad_input(compare ? "compare" : "report", e.problems());
  }
}

}  // namespace flotilla::controller
