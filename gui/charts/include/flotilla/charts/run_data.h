#pragma once
// A run's stored records as columns the panels read: per rank every numeric
// field of its step records, per node the agent's system records (NIC bytes
// turned into MB/s, CPU, each rank's RSS, NVML GPUs), the start and epoch
// records, and what the run row and nodes table say. Records with missing
// or mistyped fields are skipped (or the field is) and counted, never a
// crash. No Qt Widgets: the window, the headless renderer and the tests
// build it alike, and it may be built on any thread.

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"

namespace flotilla::charts {

inline constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// One rank's step records, one row per step in step order. Every numeric
// field the rank ever reported has a column as long as `step`, NaN where a
// record lacked it. A coarse rank (the first paint of a long run) has one row
// per bucket of steps instead: the bucket's mean, with its lowest and highest
// value in `low` and `high`.
struct RankColumns {
  std::string node;
  int64_t rank = 0;
  std::optional<int64_t> stage;  // pipeline ranks
  int64_t replica = 0;
  std::vector<double> step;
  std::vector<double> time;  // the node's clock, seconds since the Unix epoch (NaN: not stamped)
  std::map<std::string, std::vector<double>> fields;
  std::map<std::string, std::vector<double>> low, high;  // coarse only

  size_t rows() const { return step.size(); }
  // The column of `name`, nullptr when the rank never reported it.
  const std::vector<double>* field(const std::string& name) const;
  bool has(const std::string& name) const { return field(name) != nullptr; }
};

// One node's system records (the agent samples them once a second).
struct SystemColumns {
  struct Gpu {
    std::string name;
    std::vector<double> util;      // 0..1
    std::vector<double> mem_used;  // bytes
    double mem_total = kMissing;   // bytes
  };
  std::string node;
  std::vector<double> time;
  std::vector<double> cpu_util;                     // 0..1
  std::vector<double> nic_rx_mb_s, nic_tx_mb_s;     // since the previous sample; NaN for the first
  std::map<int64_t, std::vector<double>> rank_rss;  // bytes, NaN where the rank was not running
  std::map<int64_t, Gpu> gpus;                      // by NVML index
  // The cumulative counters of the last sample, for the next one's rate.
  double last_rx = kMissing, last_tx = kMissing, last_time = kMissing;

  size_t rows() const { return time.size(); }
};

struct StartInfo {
  std::string node;
  int64_t rank = 0;
  int64_t world_size = 0;
  std::string model, dataset, device;
  int64_t blocks = 0;
  std::vector<int64_t> balance;
  int64_t steps_per_epoch = 0;
  double time = kMissing;
};

// The lead rank's epoch record.
struct EpochPoint {
  int64_t epoch = 0;
  double step = kMissing;  // the global step count at the epoch's end
  double loss = kMissing, acc_train = kMissing, acc_test = kMissing;
  double time = kMissing;
};

struct NodeInfo {
  std::string name, host;
  std::vector<std::pair<std::string, double>> probe_gpus;  // name, memory bytes (the last probe)
  double memory_bytes = kMissing;                          // the last probe's
};

// The shape of the job, from the config (and the records where it has none).
struct JobShape {
  std::string strategy;  // single, dp, ddp, pipeline, pipeline_ddp
  std::string device;    // cpu, cuda
  int64_t world_size = 1;
  int64_t replicas = 1;     // data-parallel replicas: ranks for ddp, pipelines for pipeline_ddp
  int64_t stages = 1;       // pipeline stages per replica
  int64_t chunks = 1;       // micro-batches per step
  std::string compression;  // none, uniform, sort_quant
};

struct RunData {
  controller::RunRow run;
  std::vector<controller::TransitionRow> transitions;
  std::vector<NodeInfo> nodes;
  JobShape shape;
  std::map<int64_t, RankColumns> ranks;
  std::map<std::string, SystemColumns> systems;
  std::map<int64_t, StartInfo> starts;
  std::vector<EpochPoint> epochs;  // the lowest rank's that reports epochs
  int64_t epoch_rank = -1;
  // Per node: the last seq read, how many records, the newest record's time.
  std::map<std::string, int64_t> last_seq;
  std::map<std::string, int64_t> records_per_node;
  std::map<std::string, double> last_time;
  std::map<std::string, double> first_time;
  // What could not be read: "why" -> count, records and fields apart.
  std::map<std::string, int64_t> skipped_records;
  std::map<std::string, int64_t> skipped_fields;
  // A first paint from the store's step buckets: each rank row is a bucket
  // of `bucket_steps` steps. Full resolution replaces it.
  bool coarse = false;
  int64_t bucket_steps = 0;

  // The rank whose steps speak for the run: in a pipeline the last stage of
  // replica 0 (the one that computes the loss), elsewhere rank 0 (or the
  // lowest rank seen). -1 before any step.
  int64_t lead_rank() const;
  // The time relative x counts from on `node`: its earliest start record
  // (its first record when no start record has a time). NaN when unknown.
  double start_time(const std::string& node) const;
  bool has_times() const;  // whether step records carry the agents' `time`
  int64_t step_records() const;
};

// The job's shape from the run's config JSON and world size.
JobShape job_shape_of(const controller::RunRow& run);

// Adds records (each node's in seq order) to `data`; a record whose seq is
// not after its node's last one is ignored, so overlapping reads are harmless.
void add_records(RunData& data, const std::vector<controller::RecordRow>& records);
// Nodes as the nodes table has them (probe JSON parsed).
NodeInfo node_info_of(const controller::NodeRow& node);

}  // namespace flotilla::charts
