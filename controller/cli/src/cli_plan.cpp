#include "cli_plan.h"

#include <QDateTime>
#include <QProcess>
#include <QTemporaryDir>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_console.h"
#include "exit_status.h"
#include "flotilla/controller/link_bench.h"
#include "flotilla/controller/node_profiles.h"
#include "flotilla/controller/paths.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;

std::string ms_text(double ms) {
  return format_fixed(ms, ms < 10 ? 2 : 1) + " ms";
}

// The plan in a few lines; the prediction, what it rests on and what it leaves out.
void print_summary(const json& plan) {
  std::cout << plan.value("name", "") << ": " << plan.value("model", "") << " on "
            << plan.value("dataset", "") << ", " << plan.value("strategy", "") << ", "
            << plan.value("world_size", 0) << " rank(s)";
  if (plan.value("stages", 1) > 1)
    std::cout << " = " << plan.value("replicas", 1) << " replica(s) x " << plan.value("stages", 1)
              << " stages, " << plan["schedule"].get<std::string>() << ", "
              << plan.value("chunks", 1) << " micro-batches, balance "
              << plan["balance"]["blocks_per_stage"].dump() << " ("
              << plan["balance"].value("source", "") << ")";
  std::cout << "\n  parameters " << plan.value("parameters", 0) << " ("
            << plan.value("trainable_parameters", 0) << " trainable), batch "
            << plan.value("batch_size", 0) << " per replica\n";
  for (const auto& stage : plan["stage_plans"])
    std::cout << "  stage " << stage.value("stage", 0) << ": blocks "
              << stage.value("first_block", 0) << ".."
              << stage.value("first_block", 0) + stage.value("blocks", 1) - 1 << ", sends "
              << byte_size_text(stage.value("bytes_sent_per_step", 0.0)) << " a step\n";
  const auto& p = plan["prediction"];
  if (p.is_null()) return;
  std::cout << "predicted step " << ms_text(p.value("step_ms", 0.0)) << " = "
            << format_fixed(p.value("samples_per_s", 0.0), 1) << " samples/s ("
            << p.value("samples_per_step", 0) << " samples a step)\n"
            << "  busiest rank computes " << ms_text(p.value("compute_ms", 0.0))
            << ", waits or communicates " << ms_text(p.value("exposed_comm_ms", 0.0));
  if (plan.value("stages", 1) > 1)
    std::cout << ", bubble " << format_fixed(100 * p.value("bubble_fraction", 0.0), 1) << " %";
  std::cout << "\n";
  const auto& memory = p.value("memory", json::object());
  std::cout << "  peak memory " << byte_size_text(p.value("peak_memory_bytes", 0.0))
            << " on the fullest rank ("
            << (memory.value("measured_as", "") == "cuda_allocator" ? "CUDA allocator" : "resident")
            << "; " << byte_size_text(memory.value("loaded_bytes", 0.0))
            << " once the data and model are loaded)\n";
  for (size_t s = 0; s < p["stages"].size(); ++s) {
    const auto& stage = p["stages"][s];
    std::cout << "  stage " << s << ": forward " << ms_text(stage.value("forward_ms", 0.0))
              << ", backward " << ms_text(stage.value("backward_ms", 0.0)) << " a micro-batch"
              << ", optimizer " << ms_text(stage.value("optimizer_ms", 0.0)) << ", all-reduce "
              << ms_text(stage.value("allreduce_ms", 0.0)) << ", peak memory "
              << byte_size_text(stage.value("peak_memory_bytes", 0.0)) << " (a step adds "
              << byte_size_text(stage.value("training_memory_bytes", 0.0)) << ", evaluating "
              << byte_size_text(stage.value("evaluation_memory_bytes", 0.0)) << ")\n";
  }
  const auto& blocks = p.value("block_costs", json::object());
  if (blocks.value("source", "") == "node_profile")
    std::cout << "  blocks from node " << blocks.value("node", std::string("?")) << "'s profile of "
              << QDateTime::fromMSecsSinceEpoch(blocks.value("measured_ms", int64_t{0}))
                     .toString("yyyy-MM-dd hh:mm")
                     .toStdString()
              << " (flotilla nodes profile)";
  else if (blocks.value("source", "") == "profile")
    std::cout << "  blocks from this machine's profile of "
              << QDateTime::fromMSecsSinceEpoch(blocks.value("measured_ms", int64_t{0}))
                     .toString("yyyy-MM-dd hh:mm")
                     .toStdString()
              << " (--remeasure times them again)";
  else
    std::cout << "  blocks timed here";
  std::cout << " on " << p.value("micro_batch", 0) << " samples; links: "
            << (p["links"].is_null() ? std::string("none measured") : p["links"].get<std::string>())
            << "\n";
  for (const auto& note : p["notes"]) std::cout << "  note: " << note.get<std::string>() << "\n";
}

// The stored profiles of the first of the run's nodes that has any, for
// flotilla-train to take the blocks' times from (it says when none fits);
// without any, the blocks are timed here, and this says so.
void add_node_profiles(const Store& store, const ExperimentConfig& config, const QTemporaryDir& dir,
                       QStringList& args) {
  const auto profiles_dir = dir.filePath("node-profiles").toStdString();
  for (const auto& node : config.nodes)
    if (write_node_profiles(usable_node_profiles(store, node), profiles_dir) > 0) {
      args << "--node-profiles" << QString::fromStdString(profiles_dir) << "--profile-node"
           << QString::fromStdString(node);
      return;
    }
  std::cerr << "flotilla: no block profile of " << join_list(config.nodes)
            << " stored: the blocks are timed on this machine (`flotilla nodes profile "
            << config.nodes.front() << " RUN.yaml` times them there)\n";
}

}  // namespace

std::string prediction_line(const std::string& plan_json) {
  const auto plan = json::parse(plan_json, nullptr, false);
  if (plan.is_discarded() || !plan.contains("prediction") || !plan["prediction"].is_object())
    return {};
  const auto& p = plan["prediction"];
  const double peak = p.value("peak_memory_bytes", 0.0);
  return "predicted step " + ms_text(p.value("step_ms", 0.0)) + " = " +
         format_fixed(p.value("samples_per_s", 0.0), 1) + " samples/s" +
         (peak > 0 ? ", peak memory " + byte_size_text(peak) : std::string()) + " (links: " +
         (p["links"].is_string() ? p["links"].get<std::string>() : std::string("none measured")) +
         ")";
}

void add_plan_command(CLI::App& app, PlanCommand& plan) {
  plan.command = app.add_subcommand(
      "plan", "what the engine will do with an experiment; --predict: how fast a step will be");
  plan.command->add_option("file", plan.file, "experiment file (YAML or JSON)")->required();
  plan.command->add_option("--nodes", plan.nodes, "nodes to run on (replaces the file's nodes)");
  plan.command->add_flag("--measure", plan.measure,
                         "measure the balance as rank 0 does at start (times every block)");
  plan.command->add_flag("--predict", plan.predict,
                         "predict the step from block times measured here and the newest "
                         "`flotilla nodes bench` of the nodes (docs/predict.md)");
  plan.command->add_flag("--remeasure", plan.remeasure,
                         "with --predict: time the blocks again, not this machine's kept profile");
  plan.command->add_flag("--json", plan.json, "print the engine's plan as JSON (docs/plan.md)");
}

EnginePlan engine_plan(const Store& store, const ExperimentConfig& config, bool measure,
                       bool predict, bool remeasure) {
  QTemporaryDir dir;
  const auto config_file = dir.filePath("experiment.json").toStdString();
  std::ofstream(config_file) << to_json(config);
  QStringList args{"--plan", "--config", QString::fromStdString(config_file)};
  if (measure) args << "--measure";
  if (predict) {
    args << "--predict";
    if (remeasure) args << "--remeasure";
    if (config.slurm.enabled()) {
      std::cerr << "flotilla: a SLURM job's nodes are known only once it is allocated: the "
                   "prediction counts no communication\n";
    } else if (const auto bench = latest_link_bench(store, config.nodes, config.world_size())) {
      const auto links_file = dir.filePath("links.json").toStdString();
      std::ofstream(links_file) << link_measurements_json(*bench);
      args << "--links" << QString::fromStdString(links_file);
    } else if (config.world_size() > 1) {
      std::cerr << "flotilla: no link bench of " << node_set_key(config.nodes)
                << " stored: the prediction counts no communication (`flotilla nodes bench "
                << join_list(config.nodes) << " --ranks-per-node " << config.ranks_per_node
                << "` measures it)\n";
    }
    if (!config.slurm.enabled()) add_node_profiles(store, config, dir, args);
  }
  const auto engine = sibling_program("flotilla-train");
  QProcess process;
  process.setProcessChannelMode(QProcess::SeparateChannels);
  process.start(QString::fromStdString(engine.string()), args);
  if (!process.waitForStarted()) {
    std::cerr << "flotilla: " << engine.string() << " does not start ("
              << process.errorString().toStdString()
              << "); the plan needs the engine installed beside flotilla\n";
    return {kExitFailed, {}};
  }
  process.waitForFinished(-1);
  const auto err = process.readAllStandardError().toStdString();
  if (process.exitStatus() != QProcess::NormalExit || process.exitCode() != 0) {
    std::cerr << err;
    return {process.exitStatus() == QProcess::NormalExit && process.exitCode() == 2
                ? int(kExitBadInput)
                : int(kExitFailed),
            {}};
  }
  return {kExitDone, process.readAllStandardOutput().toStdString()};
}

std::optional<int> run_plan_command(Store& store, const PlanCommand& plan) {
  if (!plan.command || !*plan.command) return std::nullopt;
  ExperimentConfig config;
  try {
    config = load_experiment(plan.file);
  } catch (const ConfigError& e) {
    print_config_error(plan.file, e);
    return kExitBadInput;
  }
  if (!plan.nodes.empty()) config.nodes = split_list(plan.nodes);

  const auto result = engine_plan(store, config, plan.measure, plan.predict, plan.remeasure);
  if (result.status != 0) return result.status;
  const auto out = result.json;
  if (plan.json) {
    std::cout << out;
    return kExitDone;
  }
  const auto doc = json::parse(out, nullptr, false);
  if (doc.is_discarded() || doc.value("type", "") != "plan") {
    std::cerr << "flotilla: flotilla-train --plan printed no plan\n";
    return kExitFailed;
  }
  print_summary(doc);
  return kExitDone;
}

}  // namespace flotilla::controller
