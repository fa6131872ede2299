// flotilla-train: trains one rank of a run; or prints a run's plan (--plan);
// or times the all-reduce of a run's ranks (--allreduce-bench); or times a
// run's blocks on this node for `flotilla nodes profile` (--profile-blocks).
#include <malloc.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "flotilla/engine/allreduce_bench.h"
#include "flotilla/engine/block_profile_run.h"
#include "flotilla/engine/plan.h"
#include "flotilla/engine/training.h"

namespace {

// Training frees and reallocates the same activation-sized blocks every step.
// glibc would hand them back to the kernel (heap trim, per-block mmap) and
// fault them in again: measured here as ~2,000 page faults and 10 % of CPU
// time per small-CNN step. Keep them, as PyTorch's CUDA caching allocator does.
void keep_freed_memory_for_reuse() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: blocks below it come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// "-" reads the config from standard input (the window pipes its form in).
flotilla::ExperimentConfig load_config(const std::string& path) {
  if (path != "-") return flotilla::load_experiment(path);
  std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  return flotilla::parse_experiment(text, "stdin");
}

int refuse(const std::string& config_path, const std::exception& e) {
  // One write: ranks sharing a stderr file would interleave piecewise ones.
  std::cerr << ("flotilla-train: " + config_path + ": invalid:\n" + e.what() + "\n");
  return 2;
}

int exit_status(flotilla::records::Outcome outcome) {
  switch (outcome) {
    case flotilla::records::Outcome::finished:
      return 0;
    case flotilla::records::Outcome::oom:
      return 3;
    default:
      return 1;
  }
}

// This flotilla-train, which times ranks sharing the cores by running
// itself; empty where /proc cannot say (then they are timed in threads).
std::string own_binary() {
  std::error_code unknown;
  return std::filesystem::read_symlink("/proc/self/exe", unknown).string();
}

int print_plan(const std::string& config_path, flotilla::PlanOptions options,
               const std::string& links_path) {
  try {
    const auto config = load_config(config_path);
    if (!links_path.empty()) {
      std::ifstream in(links_path);
      if (!in) throw flotilla::ConfigError({"--links: cannot read " + links_path});
      options.links_json.assign(std::istreambuf_iterator<char>(in), {});
      options.links_origin = links_path;
    }
    std::cout << flotilla::plan_json(config, options) << "\n";
    return 0;
  } catch (const flotilla::ConfigError& e) {
    return refuse(config_path, e);
  } catch (const std::exception& e) {
    std::cerr << ("flotilla-train: " + config_path + ": no plan: " + e.what() + "\n");
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Trains one rank of a Flotilla run. Rank and rendezvous come from torchrun's "
      "variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)."};
  std::string config_path, records = "-";
  bool no_measure = false, quiet = false, plan = false, measure = false, bench = false,
       resume = false, predict = false, remeasure = false, profile_blocks = false;
  std::string links_path, node_profiles_dir, node_profiles_node;
  std::string min_bytes = "8", max_bytes = "256M";
  flotilla::AllreduceBenchOptions bench_options;
  app.add_option("--config", config_path, "experiment or run file (YAML or JSON); - reads stdin")
      ->required();
  app.add_option("--records", records, "where metric records go: - (stdout), fd:N, or a file path");
  app.add_flag("--no-measure", no_measure, "skip per-step timing and step records (benchmarks)");
  app.add_flag("--quiet", quiet, "no summary (or bench table) on stderr");
  app.add_flag("--resume", resume,
               "go on from the newest checkpoint (config save) that every rank holds; "
               "from step 0 when there is none");
  auto* plan_flag = app.add_flag("--plan", plan,
                                 "print the run's plan as JSON (docs/plan.md) instead of training");
  app.add_flag("--measure", measure,
               "with --plan and no balance: measure the balance as rank 0 does at start")
      ->needs(plan_flag);
  app.add_flag("--predict", predict,
               "with --plan: time every block, the optimizer and the codec here and predict "
               "the step (docs/predict.md)")
      ->needs(plan_flag);
  app.add_flag("--remeasure", remeasure,
               "with --predict: time the blocks again instead of this machine's kept profile "
               "of them, and keep the new one")
      ->needs(plan_flag);
  app.add_option("--links", links_path,
                 "with --predict: the link bench to count communication by (JSON, "
                 "docs/predict.md); without it communication is not counted")
      ->needs(plan_flag);
  app.add_option("--node-profiles", node_profiles_dir,
                 "with --predict: a folder of node profiles (`profile` records, "
                 "docs/predict.md) to take the blocks' times from")
      ->needs(plan_flag);
  app.add_option("--profile-node", node_profiles_node,
                 "with --node-profiles: the node whose profile to use")
      ->needs(plan_flag);
  auto* bench_flag = app.add_flag("--allreduce-bench", bench,
                                  "time all-reduces of every message size instead of training "
                                  "(docs/allreduce_bench.md)")
                         ->excludes(plan_flag);
  app.add_flag("--profile-blocks", profile_blocks,
               "time the blocks, optimizer and core sharing here as --plan --predict does and "
               "write them as a `profile` record instead of training (flotilla nodes profile)")
      ->excludes(plan_flag)
      ->excludes(bench_flag);
  app.add_option("--min-bytes", min_bytes, "smallest message (bytes; K, M, G suffixes), default 8")
      ->needs(bench_flag);
  app.add_option("--max-bytes", max_bytes, "largest message, default 256M")->needs(bench_flag);
  app.add_option("--step-factor", bench_options.step_factor, "2 or 4, default 2")
      ->needs(bench_flag);
  app.add_option("--iterations", bench_options.iterations, "timed operations per size, default 20")
      ->needs(bench_flag);
  app.add_option("--warmup", bench_options.warmup, "untimed operations first, default 5")
      ->needs(bench_flag);
  CLI11_PARSE(app, argc, argv);

  // A plan that measures runs blocks as a rank does; one that does not
  // leaves its large allocations as the kernel's untouched zero pages.
  if (measure || predict || !plan) keep_freed_memory_for_reuse();
  if (plan) {
    flotilla::PlanOptions options;
    options.measure = measure;
    options.predict = predict;
    options.remeasure = remeasure;
    if (predict) {
      options.profile_dir = flotilla::default_profile_dir();
      options.engine_binary = own_binary();
      options.node_profiles_dir = node_profiles_dir;
      options.node_profiles_node = node_profiles_node;
    }
    return print_plan(config_path, options, links_path);
  }

  std::unique_ptr<flotilla::FileRecordSink> sink;
  flotilla::ExperimentConfig config;
  flotilla::DistributedEnv env;
  try {
    config = load_config(config_path);
    env = flotilla::distributed_env([](const char* name) { return std::getenv(name); });
    if (bench) {
      const auto min = flotilla::parse_byte_size(min_bytes);
      const auto max = flotilla::parse_byte_size(max_bytes);
      if (!min || !max)
        throw flotilla::ConfigError(
            {"--min-bytes/--max-bytes: expected a byte count such as 8, "
             "64K, 256M or 1G, got \"" +
             (min ? max_bytes : min_bytes) + "\""});
      bench_options.min_bytes = *min;
      bench_options.max_bytes = *max;
      if (auto problems = flotilla::allreduce_bench_problems(bench_options); !problems.empty())
        throw flotilla::ConfigError(problems);
    }
    sink = flotilla::FileRecordSink::open(records);
  } catch (const std::exception& e) {
    return refuse(config_path, e);
  }

  if (profile_blocks) {
    flotilla::BlockProfileRunOptions profile;
    profile.config = config;
    profile.env = env;
    profile.sink = sink.get();
    profile.profile_dir = flotilla::default_profile_dir();
    profile.engine_binary = own_binary();
    const auto result = flotilla::run_block_profile(profile);
    if (!quiet && result.outcome != flotilla::records::Outcome::finished)
      std::cerr << ("flotilla-train: block profile " +
                    std::string(flotilla::records::name_of(result.outcome)) + ": " +
                    result.message + "\n");
    return exit_status(result.outcome);
  }

  if (bench) {
    bench_options.config = config;
    bench_options.env = env;
    bench_options.sink = sink.get();
    bench_options.table = quiet ? nullptr : &std::cerr;
    const auto result = flotilla::run_allreduce_bench(bench_options);
    if (!quiet && !result.message.empty())
      std::cerr << ("flotilla-train: all-reduce bench " +
                    std::string(flotilla::records::name_of(result.outcome)) + ": " +
                    result.message + "\n");
    return exit_status(result.outcome);
  }

  flotilla::TrainOptions options;
  options.config = config;
  options.env = env;
  options.sink = sink.get();
  options.measure = !no_measure;
  options.resume = resume;
  // The agent writes the run's config into the run folder and starts the rank on it.
  if (config_path != "-") options.scratch_folder = std::filesystem::path(config_path).parent_path();
  const auto result = flotilla::train(options);
  if (!quiet) std::cerr << flotilla::summary_table(options.config, result);
  return exit_status(result.outcome);
}
