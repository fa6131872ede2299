#include "flotilla/cli/cli.h"

#include "cli_compare.h"
#include "cli_console.h"
#include "cli_nodes.h"
#include "cli_plan.h"
#include "cli_plot.h"
#include "cli_study.h"
#include "cli_sweeps.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <QString>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exit_status.h"
#include "flotilla/controller/controller.h"
#include "flotilla/controller/paths.h"
#include "flotilla/controller/run_prediction.h"
#include "flotilla/controller/run_summary.h"

namespace flotilla::controller {
namespace {

std::string duration_text(const RunRow& run) {
  if (!run.running_ms) return "";
  const int64_t end = run.ended_ms.value_or(now_ms());
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << (end - *run.running_ms) / 1000.0 << " s";
  return s.str();
}

int command_run(Store& store, const ControllerOptions& options, const std::string& file,
                const std::string& nodes, bool predict) {
  ExperimentConfig config;
  try {
    config = load_experiment(file);
  } catch (const ConfigError& e) {
    print_config_error(file, e);
    return kExitBadInput;
  }
  if (!nodes.empty()) config.nodes = split_list(nodes);
  // Predicted here, before anything starts: the run's ranks would share
  // this machine's cores with the timing.
  std::string prediction;
  if (predict) {
    const auto plan = engine_plan(store, config, false, true);
    if (plan.status != 0) return plan.status;
    prediction = plan.json;
  }
  const int64_t experiment_id = store.save_experiment(config.name, to_json(config));
  ConsoleController console(store, options);
  Controller& controller = console.controller;
  std::string run;
  try {
    run = controller.start_run(config, experiment_id);
  } catch (const ConfigError& e) {
    print_config_error(file, e);
    return kExitBadInput;
  }
  std::string node_list;
  for (const auto& node : config.nodes) node_list += (node_list.empty() ? "" : ",") + node;
  if (!prediction.empty()) {
    set_run_prediction(store, run, prediction);
    std::cout << prediction_line(prediction) << "\n";
  }
  std::cout << "run " << run << ": " << config.name << ", " << config.world_size() << " rank(s) on "
            << node_list << "\n(Ctrl-C leaves it running: `flotilla attach " << run
            << "` follows it again, `flotilla kill " << run << "` stops it)" << std::endl;
  return follow_to_end(store, controller, {run});
}

int command_attach(Store& store, const ControllerOptions& options, std::vector<std::string> runs) {
  ConsoleController console(store, options);
  Controller& controller = console.controller;
  if (!runs.empty()) {
    for (const auto& run : runs) {
      if (!store.run(run)) throw std::runtime_error("no run \"" + run + "\" in the database");
      controller.attach(run);
    }
    for (const auto& run : runs) std::cout << "attached to " << run << std::endl;
    return follow_to_end(store, controller, runs);
  }
  // Every live run, and the live sweeps whose controller has gone.
  runs = controller.attach_live_runs();
  for (const auto& run : runs) std::cout << "attached to " << run << std::endl;
  bool sweeps = false;
  const int status = with_live_sweeps(
      store, console, [&] { return follow_to_end(store, controller, runs); }, &sweeps);
  if (runs.empty() && !sweeps)
    std::cout << "no live runs or sweeps in " << store.path().toStdString() << "\n";
  return status;
}

int command_resume(Store& store, const ControllerOptions& options, const std::string& run) {
  ConsoleController console(store, options);
  Controller& controller = console.controller;
  try {
    controller.resume_run(run);
  } catch (const ConfigError& e) {
    print_config_error("run " + run, e);
    return kExitBadInput;
  }
  std::cout << "run " << run << ": attempt " << store.attempts(run)
            << ", going on from its newest checkpoint\n(Ctrl-C leaves it running: `flotilla "
               "attach "
            << run << "` follows it again)" << std::endl;
  return follow_to_end(store, controller, {run});
}

int command_kill(Store& store, const ControllerOptions& options, const std::string& run,
                 double grace_s) {
  ConsoleController console(store, options);
  Controller& controller = console.controller;
  if (!controller.kill_run(run, grace_s)) {
    std::cout << "run " << run << " had already ended: " << name_of(store.run(run)->state) << "\n";
    return kExitDone;
  }
  const auto limit = std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000) + 60000);
  if (!controller.wait_for_end(run, limit)) {
    std::cerr << "flotilla: run " << run << " did not confirm its end within "
              << limit.count() / 1000 << " s\n";
    return kExitFailed;
  }
  const auto row = store.run(run);
  std::cout << "run " << run << " " << name_of(row->state)
            << (row->reason.empty() ? "" : ": " + row->reason) << "\n";
  return row->state == RunState::killed ? kExitDone : exit_status_of(row->state);
}

int command_runs(Store& store) {
  std::cout << std::left << std::setw(23) << "RUN" << std::setw(28) << "EXPERIMENT" << std::setw(10)
            << "STATE" << std::setw(14) << "NODES" << std::setw(7) << "RANKS" << std::setw(11)
            << "DURATION"
            << "REASON\n";
  for (const auto& run : store.runs()) {
    std::string reason = run.reason.substr(0, run.reason.find('\n'));
    if (reason.size() > 60) reason = reason.substr(0, 57) + "...";
    std::cout << std::left << std::setw(23) << run.id << std::setw(28)
              << run.experiment_name.substr(0, 27) << std::setw(10) << name_of(run.state)
              << std::setw(14) << join_list(run.nodes).substr(0, 13) << std::setw(7)
              << run.world_size << std::setw(11) << duration_text(run) << reason << "\n";
  }
  return kExitDone;
}

int command_show(Store& store, const std::string& run, const std::string& format) {
  const auto row = store.run(run);
  if (!row) throw std::runtime_error("no run \"" + run + "\" in " + store.path().toStdString());
  const auto records = store.records(run);
  if (format == "json")
    std::cout << summary_json(summarize(*row, records)) << "\n";
  else if (format == "csv")
    std::cout << steps_csv(records);
  else
    std::cout << summary_table(summarize(*row, records));
  return kExitDone;
}

int command_experiments_list(Store& store) {
  std::cout << std::left << std::setw(32) << "NAME" << std::setw(16) << "MODEL" << std::setw(16)
            << "DATASET" << std::setw(14) << "STRATEGY"
            << "RANKS\n";
  for (const auto& row : store.experiments()) {
    try {
      const auto c = parse_experiment(row.config_json, row.name);
      std::cout << std::left << std::setw(32) << row.name << std::setw(16) << name_of(c.model)
                << std::setw(16) << name_of(c.dataset) << std::setw(14) << name_of(c.strategy)
                << c.world_size() << "\n";
    } catch (const ConfigError& e) {
      std::cout << std::left << std::setw(32) << row.name
                << "(stored config no longer valid: " << e.problems().front() << ")\n";
    }
  }
  return kExitDone;
}

int command_experiments_import(Store& store, const std::vector<std::string>& files,
                               const std::string& name) {
  if (!name.empty() && files.size() != 1) throw std::runtime_error("--name needs exactly one file");
  int status = kExitDone;
  for (const auto& file : files) {
    try {
      auto config = load_experiment(file);
      if (!name.empty()) config.name = name;
      store.save_experiment(config.name, to_json(config));
      std::cout << "imported " << config.name << " from " << file << "\n";
    } catch (const ConfigError& e) {
      print_config_error(file, e);
      status = kExitBadInput;
    }
  }
  return status;
}

int command_experiments_export(Store& store, const std::string& name, const std::string& output) {
  const auto row = store.experiment(name);
  if (!row) throw std::runtime_error("no experiment \"" + name + "\" in the database");
  const std::string yaml = to_yaml(parse_experiment(row->config_json, name));
  if (output.empty() || output == "-") {
    std::cout << yaml;
    return kExitDone;
  }
  std::ofstream out(output);
  if (!(out << yaml)) throw std::runtime_error("cannot write " + output);
  std::cout << "exported " << name << " to " << output << "\n";
  return kExitDone;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"Flotilla: design, run, watch and compare distributed training experiments."};
  app.require_subcommand(1);
  app.fallthrough();
  std::string db = default_database_path().toStdString();
  app.add_option("--db", db, "the SQLite database")->capture_default_str();
  ControllerOptions options;
  options.connect.known_hosts = default_known_hosts();
  app.add_option("--known-hosts", options.connect.known_hosts,
                 "the SSH host keys nodes are checked against")
      ->capture_default_str();
  app.add_flag("--trust-new-host-key", options.connect.trust_new_host_key,
               "accept and remember a node's host key not seen before (a changed key is always "
               "refused)");
  StoreOptions store_options;
  app.add_option("--store-queue-limit", store_options.queue_limit_records,
                 "the most records the database's writer holds in memory; past it, while the "
                 "database refuses writes, records are fetched again from the agents' spools "
                 "once it takes them")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::vector<std::string> confirmed_keys;
  app.add_option("--trust-host-key", confirmed_keys,
                 "NODE=SHA256:...: accept and remember NODE's host key not seen before only when "
                 "it has this fingerprint, as a refusal showed it (repeatable)")
      ->check([](const std::string& value) -> std::string {
        const auto equals = value.find('=');
        if (equals == 0 || equals == std::string::npos ||
            value.compare(equals + 1, 7, "SHA256:") != 0)
          return "\"" + value + "\" is not NODE=SHA256:<fingerprint>";
        return {};
      });

  auto* run = app.add_subcommand("run", "run an experiment and follow it to its end");
  std::string file, nodes;
  bool predict = false;
  run->add_option("experiment", file, "experiment file (YAML or JSON)")->required();
  run->add_option("--nodes", nodes, "comma-separated nodes, overriding the file's `nodes`");
  run->add_flag("--predict", predict,
                "predict the step first (`flotilla plan --predict`) and keep it with the run: "
                "compare's predicted_throughput and prediction_err_pct");

  auto* attach = app.add_subcommand(
      "attach", "follow live runs again (all when none is named, and continue live sweeps)");
  std::vector<std::string> attach_runs;
  attach->add_option("runs", attach_runs, "run ids");

  auto* resume = app.add_subcommand(
      "resume",
      "a new attempt of a failed or killed run, from its newest checkpoint (config save)");
  std::string resume_run;
  resume->add_option("run", resume_run, "run id")->required();

  auto* runs = app.add_subcommand("runs", "list runs");

  auto* show = app.add_subcommand("show", "a run's summary, summary as JSON, or steps as CSV");
  std::string show_run, format = "table";
  show->add_option("run", show_run, "run id")->required();
  show->add_option("--format", format, "table, json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();

  auto* kill = app.add_subcommand("kill", "stop a run: SIGTERM, then SIGKILL after the grace");
  std::string kill_run;
  double grace_s = 5.0;
  kill->add_option("run", kill_run, "run id")->required();
  kill->add_option("--grace", grace_s, "seconds between SIGTERM and SIGKILL")
      ->check(CLI::Range(0.0, protocol::kMaxGraceSeconds))
      ->capture_default_str();

  auto* experiments = app.add_subcommand("experiments", "stored experiments");
  experiments->require_subcommand(1);
  auto* list = experiments->add_subcommand("list", "list stored experiments");
  auto* import = experiments->add_subcommand("import", "store experiment files");
  std::vector<std::string> import_files;
  std::string import_name;
  import->add_option("files", import_files, "YAML or JSON files")->required();
  import->add_option("--name", import_name, "store under this name (one file only)");
  auto* export_ = experiments->add_subcommand("export", "write a stored experiment as YAML");
  std::string export_name, export_output;
  export_->add_option("name", export_name, "experiment name")->required();
  export_->add_option("-o,--output", export_output, "file (default: standard output)");

  NodeCommands node_commands;
  add_node_commands(app, node_commands);
  PlotCommand plot;
  add_plot_command(app, plot);
  SweepCommands sweep_commands;
  add_sweep_commands(app, sweep_commands);
  CompareCommands compare_commands;
  add_compare_commands(app, compare_commands);
  StudyCommands study_commands;
  add_study_commands(app, study_commands);
  PlanCommand plan_command;
  add_plan_command(app, plan_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }

  for (const auto& value : confirmed_keys) {
    const auto equals = value.find('=');
    options.connect.confirmed_host_keys[value.substr(0, equals)] = value.substr(equals + 1);
  }

  try {
    Store store(QString::fromStdString(db), store_options);
    if (*run) return command_run(store, options, file, nodes, predict);
    if (*attach) return command_attach(store, options, attach_runs);
    if (*resume) return command_resume(store, options, resume_run);
    if (*runs) return command_runs(store);
    if (*show) return command_show(store, show_run, format);
    if (*kill) return command_kill(store, options, kill_run, grace_s);
    if (auto status = run_node_commands(store, node_commands, options.connect)) return *status;
    if (auto status = run_plot_command(store, plot)) return *status;
    if (auto status = run_sweep_commands(store, sweep_commands, options)) return *status;
    if (auto status = run_compare_commands(store, compare_commands)) return *status;
    if (auto status = run_study_commands(store, study_commands, options)) return *status;
    if (auto status = run_plan_command(store, plan_command)) return *status;
    if (*list) return command_experiments_list(store);
    if (*import) return command_experiments_import(store, import_files, import_name);
    if (*export_) return command_experiments_export(store, export_name, export_output);
  } catch (const ConfigError& e) {
    print_config_error("the experiment", e);
  } catch (const std::exception& e) {
    std::cerr << "flotilla: " << e.what() << "\n";
  }
  return kExitBadInput;
}

}  // namespace flotilla::controller
