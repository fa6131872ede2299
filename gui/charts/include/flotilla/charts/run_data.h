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

// How much of a long run a view keeps in memory (RunData::limits): each rank
// keeps its newest `recent_steps` steps row by row, and the steps before them
// folded into buckets of steps (RunData::step_bucket wide, the same steps for
// every rank), a bucket's row holding the mean of each value over its steps.
// Whenever a rank would hold more than `coarse_rows` buckets, the buckets
// become twice as wide (two merged into one). Each node's system samples are
// kept alike: the newest `recent_system_seconds` sample by sample, the older
// ones in buckets of seconds. So a rank holds at most about 5/4 x
// recent_steps + coarse_rows rows, a node 5/4 x recent_system_seconds +
// coarse_rows, however long the run: what a live view needs to stay bounded.
struct RowLimits {
  int64_t recent_steps = 8192;
  size_t coarse_rows = 2048;
  int64_t first_bucket_steps = 16;
  double recent_system_seconds = 3600;
  double first_bucket_seconds = 16;
};

// One rank's step records, one row per step in step order. Every numeric
// field the rank ever reported has a column as long as `step`, NaN where a
// record lacked it. A coarse rank (the first paint of a long run) has one row
// per bucket of steps instead: the bucket's mean, with its lowest and highest
// value in `low` and `high`. Under RowLimits the first `folded_rows` rows are
// buckets of older steps (their means, `step` and `time` too), the rest one
// step each.
struct RankColumns {
  std::string node;
  int64_t rank = 0;
  std::optional<int64_t> stage;  // pipeline ranks: the first place the rank had
  int64_t replica = 0;
  // An elastic pipeline moves ranks: the place of its newest step record.
  std::optional<int64_t> last_stage;
  int64_t last_replica = 0;
  std::vector<double> step;
  std::vector<double> time;  // the node's clock, seconds since the Unix epoch (NaN: not stamped)
  std::map<std::string, std::vector<double>> fields;
  std::map<std::string, std::vector<double>> low, high;  // coarse only
  size_t folded_rows = 0;
  std::vector<int64_t> folded_steps;  // how many steps each folded row holds
  int64_t records = 0;                // step records read (or summarised by the buckets)

  size_t rows() const { return step.size(); }
  // How many steps row `row` stands for: 1 but for a folded row.
  int64_t steps_in(size_t row) const { return row < folded_rows ? folded_steps[row] : 1; }
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
  double rank_rss_peak = kMissing;  // the highest rank_rss sampled, folded or not
  // Under RowLimits: the first `folded_rows` rows are buckets of
  // `bucket_seconds` of samples (their means), for the samples before
  // `folded_before` (the node's clock).
  size_t folded_rows = 0;
  std::vector<int64_t> folded_samples;  // how many samples each folded row holds
  double bucket_seconds = 0;
  double folded_before = kMissing;

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

// An elastic pipeline's change of layout (a transition record), once for
// every rank's record of it.
struct LayoutChange {
  int64_t step = 0;  // the first step trained in the new layout
  double time = kMissing;
  std::string node;   // whose clock `time` is
  std::string words;  // "2x2 -> 1x4"
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
  std::vector<EpochPoint> epochs;            // the lowest rank's that reports epochs
  std::vector<LayoutChange> layout_changes;  // in step order
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
  // Unset: every record's row is kept (a finished run drawn once, the CLI).
  // Set (a live view): older rows are folded as RowLimits says, as records
  // are added.
  std::optional<RowLimits> limits;
  // The steps before `folded_before_step` are folded, in buckets of
  // `step_bucket` steps (0: nothing folded yet).
  int64_t step_bucket = 0;
  double folded_before_step = 0;

  // The rank whose steps speak for the run: in a pipeline the last stage of
  // replica 0 (the one that computes the loss), elsewhere rank 0 (or the
  // lowest rank seen). -1 before any step.
  int64_t lead_rank() const;
  // The time relative x counts from on `node`: its earliest start record
  // (its first record when no start record has a time). NaN when unknown.
  double start_time(const std::string& node) const;
  bool has_times() const;  // whether step records carry the agents' `time`
  int64_t step_records() const;
  // Whether some rank or node holds folded rows.
  bool steps_folded() const { return step_bucket > 0; }
  bool systems_folded() const;
};

// The job's shape from the run's config JSON and world size.
JobShape job_shape_of(const controller::RunRow& run);

// Adds records (each node's in seq order) to `data`; a record whose seq is
// not after its node's last one is ignored, so overlapping reads are harmless.
void add_records(RunData& data, const std::vector<controller::RecordRow>& records);
// Nodes as the nodes table has them (probe JSON parsed).
NodeInfo node_info_of(const controller::NodeRow& node);

}  // namespace flotilla::charts
