#pragma once
// Trains one rank. Deliberately free of LibTorch headers: programs and tests
// that drive a run include only this.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/metric_records.h"

namespace flotilla {

// Rank and rendezvous as torchrun passes them; absent variables mean one rank.
struct DistributedEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};
// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT through
// `lookup` (getenv in programs); throws ConfigError naming a bad variable.
DistributedEnv distributed_env(const std::function<const char*(const char*)>& lookup);

// Where metric records go, one JSON object a line, flushed as written so that
// a reader sees every step as it happens.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void write(std::string_view line) = 0;
};

class FileRecordSink final : public RecordSink {
 public:
  explicit FileRecordSink(std::FILE* file, bool owned = false) : file_(file), owned_(owned) {}
  // "-" is stdout, "fd:N" an inherited descriptor, anything else a file path (appended).
  static std::unique_ptr<FileRecordSink> open(const std::string& target);
  ~FileRecordSink() override;
  void write(std::string_view line) override;

 private:
  std::FILE* file_;
  bool owned_;
};

struct TrainOptions {
  ExperimentConfig config;
  DistributedEnv env;
  RecordSink* sink = nullptr;  // nullptr: no records
  bool measure = true;         // false: no per-step timing or step records (benchmarks)
  // Where the rank may write files of its own (elastic.cache's): the run
  // folder where the agent starts it; empty: the system's temporary folder.
  std::filesystem::path scratch_folder;
  // Continue from the newest checkpoint (config save.dir) that every rank
  // holds; from step 0 when there is none.
  bool resume = false;
};

struct TrainResult {
  records::Outcome outcome = records::Outcome::finished;
  std::string message;
  int64_t steps = 0;
  int64_t epochs = 0;
  int64_t parameters = 0;
  double acc_train = 0;
  double acc_test = 0;
  double elapsed_s = 0;
  // The run's throughput (flotilla/protocol/run_metrics.h: the job's samples
  // over their time in the steps after warm-up); 0 without steps.
  double samples_per_s = 0;
  int64_t threads = 0;       // LibTorch's intra-op pool
  int64_t blas_threads = 0;  // the BLAS library's pool
  std::string blas;          // which BLAS library, as found at run time
  // Mean per-step phases over measured steps (first excluded).
  double data_ms = 0, forward_ms = 0, backward_ms = 0, comm_ms = 0, optimizer_ms = 0, step_ms = 0;
};

// Problems that make this engine refuse a valid config ("not implemented yet",
// no GPU); empty when it can train it.
std::vector<std::string> unsupported_features(const ExperimentConfig& config);

// Never throws: every failure ends as the result's outcome (and an end record).
TrainResult train(const TrainOptions& options);

// A human-readable summary table of a finished run.
std::string summary_table(const ExperimentConfig& config, const TrainResult& result);

}  // namespace flotilla
