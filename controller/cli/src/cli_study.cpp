#include "cli_study.h"

#include <QDateTime>
#include <QFileInfo>
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "cli_console.h"
#include "cli_sweeps.h"
#include "flotilla/controller/study.h"
#include "flotilla/controller/sweep_store.h"

namespace flotilla::controller {
namespace {

std::string database_of(const Store& store) {
  return QFileInfo(store.path()).absoluteFilePath().toStdString();
}

// Writes the report of stored sweep `name`; the exit status.
int report_sweep(Store& store, const std::string& name, const std::string& output,
                 const std::string& command) {
  const auto sweep = SweepStore(store).sweep(name);
  if (!sweep) {
    std::cerr << "flotilla study: no sweep \"" << name << "\" in " << database_of(store) << "\n";
    return kExitBadInput;
  }
  StudyReportOptions options;
  options.directory = output;
  options.database = database_of(store);
  options.command = command;
  try {
    const auto result = write_study_report(store, *sweep, options);
    std::cout << "wrote " << result.markdown.string() << " (" << result.images.size()
              << " charts), " << (options.directory / "study.csv").string() << " and "
              << result.csv.string() << "\n";
    for (const auto& problem : result.problems)
      std::cerr << "flotilla study: chart " << problem << "\n";
    return result.problems.empty() ? kExitDone : kExitFailed;
  } catch (const CompareError& e) {
    std::cerr << "flotilla study: sweep " << name << ": " << e.problems().front() << "\n";
    return kExitFailed;
  } catch (const ConfigError& e) {
    print_config_error("sweep " + name, e);
    return kExitBadInput;
  }
}

// The command a report says made it: what was asked, without the machine's
// paths (the database, the report's folder), which mean nothing elsewhere.
std::string shown_command(const StudyCommands& c) {
  if (!*c.run) return "flotilla study report " + c.report_sweep;
  const std::string name = std::filesystem::path(c.name).filename().string();  // a sweep file's too
  std::string command = "flotilla study run " + name + " --scale " + c.scale;
  if (!c.nodes.empty()) command += " --nodes " + c.nodes;
  if (!c.sweep_name.empty()) command += " --name " + c.sweep_name;
  if (c.predict) command += " --predict";
  return command;
}

int command_list() {
  // "cpu,gpu,gpu1" is 12 wide: the columns keep a space between them.
  std::cout << std::left << std::setw(22) << "STUDY" << std::setw(14) << "SCALES"
            << "DESCRIPTION\n";
  for (const auto& name : study_names()) {
    std::string scales, description;
    for (const auto& scale : study_scales(name)) {
      scales += (scales.empty() ? "" : ",") + scale;
      if (description.empty()) description = load_study(name, scale).description;
    }
    std::cout << std::left << std::setw(22) << name << std::setw(14) << scales << description
              << "\n";
  }
  return kExitDone;
}

int command_run(Store& store, const StudyCommands& c, const ControllerOptions& options) {
  SweepSpec spec;
  try {
    if (c.output.empty() && !c.dry_run)
      throw ConfigError({"-o DIR: the report's directory is required"});
    spec = load_study(c.name, c.scale);
    // A study runs again and again: each run is a sweep of its own, named
    // with the time it started unless --name says otherwise.
    if (!c.sweep_name.empty()) {
      if (auto problem = sweep_name_problem(c.sweep_name); !problem.empty())
        throw ConfigError({"--name: " + problem});
      spec.name = c.sweep_name;
    } else {
      spec.name += QDateTime::currentDateTimeUtc().toString("'-'yyyyMMdd'-'HHmmss").toStdString();
    }
  } catch (const ConfigError& e) {
    print_config_error("study " + c.name, e);
    return kExitBadInput;
  }
  const std::string source = "study " + c.name + " (" + c.scale + ")";
  const int status =
      launch_sweep(store, spec, {source, c.nodes, c.dry_run, c.yes, c.predict}, options);
  if (c.dry_run || status == kExitBadInput) return status;
  const int reported = report_sweep(store, spec.name, c.output, shown_command(c));
  return std::max(status, reported);
}

}  // namespace

void add_study_commands(CLI::App& app, StudyCommands& c) {
  c.study = app.add_subcommand(
      "study", "the seed studies: run one as a sweep and write its report with the seed's table");
  c.study->require_subcommand(1);
  c.list = c.study->add_subcommand("list", "the studies and their scales");
  c.run = c.study->add_subcommand(
      "run", "run a study's sweep (real training) and write DIR/report.md, study.csv, charts");
  c.run->add_option("name", c.name, "a study (`flotilla study list`) or a sweep file (.yaml)")
      ->required();
  c.run
      ->add_option("--scale", c.scale,
                   "cpu (this machine, minutes), gpu (the seed's sizes) or gpu1 (one GPU, minutes)")
      ->capture_default_str();
  c.run->add_option("--nodes", c.nodes, "comma-separated nodes, overriding the study's");
  c.run->add_option("--name", c.sweep_name,
                    "store the sweep under this name (default: the study's, with the time)");
  c.run->add_option("-o,--output", c.output, "the report's directory (created if missing)");
  c.run->add_flag("--dry-run", c.dry_run, "print the grid and the refused points, run nothing");
  c.run->add_flag("--yes", c.yes, "queue a grid of more than 1,000 runs");
  c.run->add_flag("--predict", c.predict,
                  "predict each point first (`flotilla plan --predict`); the report then has a "
                  "predicted column and its error beside samples/s and peak memory");
  c.report = c.study->add_subcommand(
      "report", "write the study report of a stored sweep (one continued by `flotilla attach`)");
  c.report->add_option("sweep", c.report_sweep, "sweep name (`flotilla sweeps`)")->required();
  c.report->add_option("-o,--output", c.output, "the report's directory (created if missing)")
      ->required();
}

std::optional<int> run_study_commands(Store& store, const StudyCommands& c,
                                      const ControllerOptions& options) {
  if (!c.study || !*c.study) return std::nullopt;
  if (*c.list) return command_list();
  if (*c.run) return command_run(store, c, options);
  return report_sweep(store, c.report_sweep, c.output, shown_command(c));
}

}  // namespace flotilla::controller
