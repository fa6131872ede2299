// flotilla-train: trains one rank of a run.
#include <malloc.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>

#include "flotilla/engine/training.h"

// Training frees and reallocates the same activation-sized blocks every step.
// glibc would hand them back to the kernel (heap trim, per-block mmap) and
// fault them in again: measured here as ~2,000 page faults and 10 % of CPU
// time per small-CNN step. Keep them, as PyTorch's CUDA caching allocator does.
static void keep_freed_memory_for_reuse() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: blocks below it come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

int main(int argc, char** argv) {
  keep_freed_memory_for_reuse();
  CLI::App app{
      "Trains one rank of a Flotilla run. Rank and rendezvous come from torchrun's "
      "variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)."};
  std::string config_path, records = "-";
  bool no_measure = false, quiet = false;
  app.add_option("--config", config_path, "experiment or run file (YAML or JSON)")->required();
  app.add_option("--records", records, "where metric records go: - (stdout), fd:N, or a file path");
  app.add_flag("--no-measure", no_measure, "skip per-step timing and step records (benchmarks)");
  app.add_flag("--quiet", quiet, "no summary on stderr");
  CLI11_PARSE(app, argc, argv);

  flotilla::TrainOptions options;
  std::unique_ptr<flotilla::FileRecordSink> sink;
  try {
    options.config = flotilla::load_experiment(config_path);
    options.env = flotilla::distributed_env([](const char* name) { return std::getenv(name); });
    sink = flotilla::FileRecordSink::open(records);
  } catch (const std::exception& e) {
    std::cerr << "flotilla-train: " << config_path << ": invalid:\n" << e.what() << "\n";
    return 2;
  }
  options.sink = sink.get();
  options.measure = !no_measure;
  const auto result = flotilla::train(options);
  if (!quiet) std::cerr << flotilla::summary_table(options.config, result);
  switch (result.outcome) {
    case flotilla::records::Outcome::finished:
      return 0;
    case flotilla::records::Outcome::oom:
      return 3;
    default:
      return 1;
  }
}
