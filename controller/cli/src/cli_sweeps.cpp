#include "cli_sweeps.h"

#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli_console.h"
#include "cli_plan.h"
#include "flotilla/controller/compare.h"
#include "flotilla/controller/run_prediction.h"
#include "flotilla/controller/sweep_plan.h"
#include "flotilla/controller/sweep_report.h"
#include "flotilla/controller/sweep_runner.h"
#include "flotilla/controller/sweep_store.h"

namespace flotilla::controller {
namespace {

// Sweep progress on the console, in turn with the runs' own lines.
class SweepPrinter final : public SweepObserver {
 public:
  // `predictions` (by point index) are kept with the points' runs in `store`.
  SweepPrinter(ConsoleObserver& console, int64_t points, Store* store = nullptr,
               const std::map<int64_t, std::string>* predictions = nullptr)
      : console_(console), points_(points), store_(store), predictions_(predictions) {}
  void point_run_stored(const SweepRow&, const SweepPointRow& point,
                        const std::string& run) override {
    // As `flotilla run --predict` keeps it: compare's predicted columns.
    if (!predictions_) return;
    const auto it = predictions_->find(point.index);
    if (it == predictions_->end()) return;
    try {
      set_run_prediction(*store_, run, it->second);
    } catch (const StoreError& e) {  // the run goes on; only its predicted columns are missing
      console_.problem("run " + run + ": its prediction was not kept: " + e.what());
    }
  }
  void point_started(const SweepRow& sweep, const SweepPointRow& point,
                     const std::string& run) override {
    console_.print("sweep " + sweep.name + ": point " + position(point) + " (" +
                   point_values_text(point.values_json) + "): run " + run);
  }
  void point_ended(const SweepRow& sweep, const SweepPointRow& point, PointState state,
                   const std::string& reason) override {
    const std::string why = reason.substr(0, reason.find('\n'));
    console_.print("sweep " + sweep.name + ": point " + position(point) + " " +
                   std::string(name_of(state)) + (why.empty() ? "" : ": " + why));
  }
  void points_skipped(const SweepRow& sweep, const std::vector<DroppedPoint>& points) override {
    std::string which, reason = points.front().reason;
    for (const auto& p : points) which += (which.empty() ? "" : ", ") + std::to_string(p.index + 1);
    console_.print("sweep " + sweep.name + ": point" + (points.size() > 1 ? "s " : " ") + which +
                   " skipped: " + reason);
  }
  void problem(const std::string& message) override { console_.problem(message); }

 private:
  std::string position(const SweepPointRow& point) const {
    return std::to_string(point.index + 1) + (points_ > 0 ? "/" + std::to_string(points_) : "");
  }
  ConsoleObserver& console_;
  int64_t points_;
  Store* store_;
  const std::map<int64_t, std::string>* predictions_;
};

std::vector<SweepPointRow> rows_of(const std::vector<SweepPoint>& points) {
  std::vector<SweepPointRow> rows;
  for (const auto& p : points) {
    SweepPointRow row;
    row.index = p.index;
    row.values_json = p.values_json;
    row.coords = p.coords;
    row.repeat = p.repeat;
    row.config_json = p.config_json;
    row.state = p.refused() ? PointState::refused : PointState::queued;
    for (const auto& problem : p.problems) row.reason += (row.reason.empty() ? "" : "\n") + problem;
    rows.push_back(std::move(row));
  }
  return rows;
}

// `flotilla plan --predict` of every point that will run, one line each:
// its plan JSON by point index. A point's repeats differ only in their seed,
// on which no block's time depends, so each grid point is planned once and
// its repeats keep that plan. A point the engine cannot plan says why
// (engine_plan printed it) and runs anyway.
std::map<int64_t, std::string> predict_points(const Store& store,
                                              const std::vector<SweepPointRow>& rows) {
  std::map<int64_t, std::string> plans;
  std::map<std::vector<int64_t>, std::string> by_grid_point;
  std::cout << "predicted before anything runs (docs/predict.md):\n" << std::flush;
  for (const auto& row : rows) {
    if (row.state != PointState::queued) continue;
    auto [plan, first] = by_grid_point.try_emplace(row.coords);
    if (first) {
      const std::string label = "point " + std::to_string(row.index + 1) + " (" +
                                point_values_text(row.values_json) + ")";
      try {
        const auto result =
            engine_plan(store, parse_experiment(row.config_json, label), false, true);
        if (result.status == kExitDone) plan->second = result.json;
      } catch (const ConfigError& e) {
        print_config_error(label, e);
      }
      const std::string line = prediction_line(plan->second);
      if (line.empty()) plan->second.clear();
      std::cout << "  " << label << ": " << (line.empty() ? "no prediction (see above)" : line)
                << "\n"
                << std::flush;
    }
    if (!plan->second.empty()) plans[row.index] = plan->second;
  }
  return plans;
}

int status_of_sweep(SweepState state, const std::vector<SweepPointRow>& points) {
  if (state == SweepState::killed) return kExitKilled;
  if (state == SweepState::running) return kExitFailed;  // stopped before its end
  return progress_of(points).failed > 0 ? kExitFailed : kExitDone;
}

}  // namespace

int launch_sweep(Store& store, SweepSpec spec, const SweepLaunch& launch,
                 const ControllerOptions& options) {
  std::vector<SweepPoint> points;
  ConsoleController console(store, options);
  try {
    points = plan_sweep(store, &console.controller, spec, {launch.nodes, launch.yes});
  } catch (const ConfigError& e) {
    print_config_error(launch.source, e);
    return kExitBadInput;
  }

  const auto rows = rows_of(points);
  const auto progress = progress_of(rows);
  std::cout << "sweep " << spec.name << ": " << progress.total << " run(s) ("
            << sweep_grid_shape(spec) << "), " << progress.queued << " to run, " << progress.refused
            << " refused\n"
            << render_table(sweep_table(spec, rows, nullptr), "table");
  if (progress.refused > 0) {
    std::cout << "refused before anything starts:\n";
    for (const auto& row : rows) {
      if (row.state != PointState::refused) continue;
      std::cout << "  point " << row.index + 1 << " (" << point_values_text(row.values_json)
                << "):\n";
      std::istringstream lines(row.reason);
      for (std::string line; std::getline(lines, line);) std::cout << "    " << line << "\n";
    }
  }
  if (progress.queued == 0) {
    std::cerr << "flotilla: sweep " << spec.name << ": every point is refused; nothing to run\n";
    return kExitBadInput;
  }
  const auto predictions =
      launch.predict ? predict_points(store, rows) : std::map<int64_t, std::string>{};
  if (launch.dry_run) return kExitDone;

  SweepPrinter printer(console.observer, progress.total, &store, &predictions);
  SweepRunner runner(store, console.controller, spec.name, &printer);
  try {
    SweepStore(store).create(spec, points, launch.source, runner.identity());
  } catch (const StoreError& e) {
    std::cerr << "flotilla: " << e.what() << "\n";
    return kExitBadInput;
  }
  runner.acquire();
  std::cout << "(Ctrl-C leaves the live run going: `flotilla attach` continues the sweep, "
               "`flotilla sweep kill "
            << spec.name << "` stops it)" << std::endl;
  const auto state = runner.run();
  const auto sweep = SweepStore(store).sweep(spec.name);
  const auto stored = SweepStore(store).points(sweep->id);
  std::cout << "\nsweep " << spec.name << " " << name_of(state) << "\n"
            << render_table(sweep_table(spec, stored, &store), "table");
  return status_of_sweep(state, stored);
}

namespace {

int command_sweep(Store& store, const SweepCommands& c, const ControllerOptions& options) {
  SweepSpec spec;
  try {
    spec = load_sweep(c.file);
    if (!c.name.empty()) {
      if (auto problem = sweep_name_problem(c.name); !problem.empty())
        throw ConfigError({"--name: " + problem});
      spec.name = c.name;
    }
  } catch (const ConfigError& e) {
    print_config_error(c.file, e);
    return kExitBadInput;
  }
  return launch_sweep(store, std::move(spec), {c.file, c.nodes, c.dry_run, c.yes, c.predict},
                      options);
}

// The stored sweep named `name`, and its definition; throws naming what is wrong.
std::pair<SweepRow, SweepSpec> stored_sweep(Store& store, const std::string& name) {
  const auto sweep = SweepStore(store).sweep(name);
  if (!sweep)
    throw std::runtime_error("no sweep \"" + name + "\" in " + store.path().toStdString());
  return {*sweep, parse_sweep(sweep->spec_json, "sweep " + name)};
}

// The runs the sweep's points started, in point order (a run whose point was
// claimed but never created is left out).
std::vector<std::string> runs_of_points(const Store& store,
                                        const std::vector<SweepPointRow>& points) {
  std::vector<std::string> runs;
  for (const auto& point : points)
    if (!point.run_id.empty() && store.run(point.run_id)) runs.push_back(point.run_id);
  return runs;
}

int command_show(Store& store, const std::string& name, const std::string& format) {
  const auto [sweep, spec] = stored_sweep(store, name);
  const auto points = SweepStore(store).points(sweep.id);
  const auto runs = runs_of_points(store, points);
  // The compare table of the sweep's runs (issue 11), the first point's run
  // the baseline of speed-up and efficiencies.
  std::optional<CompareTable> compared;
  if (!runs.empty()) compared = compare_runs(store, runs);
  if (format == "json") {
    auto j = nlohmann::json::parse(sweep_json(store, sweep, spec, points));
    j["compare"] = compared ? nlohmann::json::parse(format_compare(*compared, CompareFormat::json))
                            : nlohmann::json(nullptr);
    std::cout << j.dump(2) << "\n";
    return kExitDone;
  }
  if (format == "table") {
    const auto p = progress_of(points);
    std::cout << "sweep " << sweep.name << ": " << name_of(sweep.state)
              << (sweep.reason.empty() ? "" : " (" + sweep.reason + ")") << "; " << p.total
              << " point(s): " << p.done() << " done, " << p.running << " running, " << p.queued
              << " queued, " << p.skipped << " skipped, " << p.refused << " refused\n";
  }
  std::cout << render_table(sweep_table(spec, points, &store), format);
  // CSV is one table, the points'; `flotilla compare RUN...` gives the runs' as CSV.
  if (format == "csv") return kExitDone;
  const bool md = format == "markdown";
  if (!compared) {
    std::cout << "\n"
              << (md ? "No run yet: no compare table.\n" : "no run yet: no compare table\n");
    return kExitDone;
  }
  std::cout << "\n"
            << (md ? "### Compare table of its " : "compare table of its ") << runs.size()
            << " run(s)" << (md ? "\n\n" : ":\n")
            << format_compare(*compared, md ? CompareFormat::markdown : CompareFormat::table);
  return kExitDone;
}

int command_list(Store& store) {
  SweepStore sweeps(store);
  std::cout << std::left << std::setw(28) << "NAME" << std::setw(10) << "STATE" << std::setw(8)
            << "POINTS" << std::setw(10) << "FINISHED" << std::setw(5) << "OOM" << std::setw(8)
            << "FAILED" << std::setw(8) << "KILLED" << std::setw(9) << "SKIPPED" << std::setw(9)
            << "REFUSED" << std::setw(8) << "QUEUED"
            << "RUNNING\n";
  for (const auto& sweep : sweeps.sweeps()) {
    const auto p = progress_of(sweeps.points(sweep.id));
    std::cout << std::left << std::setw(28) << sweep.name.substr(0, 27) << std::setw(10)
              << name_of(sweep.state) << std::setw(8) << p.total << std::setw(10) << p.finished
              << std::setw(5) << p.oom << std::setw(8) << p.failed << std::setw(8) << p.killed
              << std::setw(9) << p.skipped << std::setw(9) << p.refused << std::setw(8) << p.queued
              << p.running << "\n";
  }
  return kExitDone;
}

int command_kill(Store& store, const SweepCommands& c, const ControllerOptions& options) {
  SweepStore sweeps(store);
  const auto [sweep, spec] = stored_sweep(store, c.kill_name);
  if (!sweeps.kill(sweep.id, "killed on request")) {
    std::cout << "sweep " << sweep.name << " had already ended: " << name_of(sweep.state) << "\n";
    return kExitDone;
  }
  ConsoleController console(store, options);
  int status = kExitDone;
  for (const auto& point : sweeps.points(sweep.id)) {
    if (point.state != PointState::running) continue;
    const auto run = store.run(point.run_id);
    if (!run) {
      // Claimed, its run not created yet: a live owner kills it once it is;
      // a dead one never will start it.
      const auto now = sweeps.sweep(sweep.name);
      if (now && (now->owner.empty() || !owner_alive(now->owner, now->owner_seen_ms.value_or(0))))
        sweeps.end_point(sweep.id, point.index, PointState::skipped,
                         "the sweep was killed before its run started");
      continue;
    }
    console.controller.kill_run(point.run_id, c.grace_s);
    const auto limit = std::chrono::milliseconds(static_cast<int64_t>(c.grace_s * 1000) + 60000);
    if (!console.controller.wait_for_end(point.run_id, limit)) {
      std::cerr << "flotilla: run " << point.run_id << " did not confirm its end within "
                << limit.count() / 1000 << " s\n";
      status = kExitFailed;
      continue;
    }
    const auto ended = store.run(point.run_id);
    // The owner, if one is alive, may have stored it first: either way the same.
    sweeps.end_point(sweep.id, point.index, point_state_of(ended->state), ended->reason);
  }
  const auto p = progress_of(sweeps.points(sweep.id));
  std::cout << "sweep " << sweep.name << " killed: " << p.killed << " killed, " << p.skipped
            << " skipped, " << p.done() - p.killed << " had ended\n";
  return status;
}

}  // namespace

int with_live_sweeps(Store& store, ConsoleController& console, const std::function<int()>& follow,
                     bool* any) {
  SweepPrinter printer(console.observer, 0);
  SweepPool pool(store, console.controller, &printer);
  std::vector<std::string> elsewhere;
  const auto taken = pool.continue_live_sweeps(&elsewhere);
  for (const auto& name : taken) console.observer.print("continuing sweep " + name);
  for (const auto& held : elsewhere)
    console.observer.print("sweep " + held + " is run by another controller; left to it");
  if (any) *any = !taken.empty();
  int status = follow();
  SweepStore sweeps(store);
  for (const auto& [name, state] : pool.wait()) {
    const auto sweep = sweeps.sweep(name);
    const auto points = sweep ? sweeps.points(sweep->id) : std::vector<SweepPointRow>{};
    const auto spec = sweep ? parse_sweep(sweep->spec_json, "sweep " + name) : SweepSpec{};
    std::cout << "\nsweep " << name << " " << name_of(state) << "\n"
              << render_table(sweep_table(spec, points, &store), "table");
    status = std::max(status, status_of_sweep(state, points));
  }
  return status;
}

void add_sweep_commands(CLI::App& app, SweepCommands& c) {
  c.sweep = app.add_subcommand(
      "sweep", "run a sweep file (a base experiment and axes over its keys), or show / kill one");
  c.sweep->add_option("file", c.file, "sweep file (YAML or JSON)");
  c.sweep->add_flag("--dry-run", c.dry_run, "print the grid and the refused points, run nothing");
  c.sweep->add_flag("--yes", c.yes, "queue a grid of more than 1,000 runs");
  c.sweep->add_flag("--predict", c.predict,
                    "predict each point's step, throughput and peak memory first (`flotilla "
                    "plan --predict` of each) and keep it with the point's run for compare");
  c.sweep->add_option("--nodes", c.nodes, "comma-separated nodes, overriding the base's `nodes`");
  c.sweep->add_option("--name", c.name, "store the sweep under this name instead of the file's");
  c.show = c.sweep->add_subcommand(
      "show",
      "a sweep's points (values, state, run, throughput) and the compare table of its runs");
  c.show->add_option("name", c.show_name, "sweep name")->required();
  c.show->add_option("--format", c.format, "table, markdown, csv or json")
      ->check(CLI::IsMember({"table", "markdown", "csv", "json"}))
      ->capture_default_str();
  c.kill = c.sweep->add_subcommand("kill", "kill a sweep's live run and skip its queued points");
  c.kill->add_option("name", c.kill_name, "sweep name")->required();
  c.kill->add_option("--grace", c.grace_s, "seconds between SIGTERM and SIGKILL")
      ->check(CLI::Range(0.0, protocol::kMaxGraceSeconds))
      ->capture_default_str();
  c.list = app.add_subcommand("sweeps", "list sweeps and how far each has got");
}

std::optional<int> run_sweep_commands(Store& store, const SweepCommands& c,
                                      const ControllerOptions& options) {
  if (c.list && *c.list) return command_list(store);
  if (!c.sweep || !*c.sweep) return std::nullopt;
  if (*c.show) return command_show(store, c.show_name, c.format);
  if (*c.kill) return command_kill(store, c, options);
  if (c.file.empty()) {
    std::cerr << "flotilla sweep: give a sweep file, or `show NAME` or `kill NAME`\n";
    return kExitBadInput;
  }
  return command_sweep(store, c, options);
}

}  // namespace flotilla::controller
