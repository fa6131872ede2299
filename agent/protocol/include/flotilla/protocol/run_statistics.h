#pragma once
// What one run's records amount to, and how runs relate to each other: the
// numbers of the compare table and of reports (docs/compare.md gives every
// formula). Pure functions of records, so that the table, the window and the
// sweeps' study reports cannot disagree; run_metrics.h holds the warm-up rule
// and the throughput they all share.

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "flotilla/protocol/metric_records.h"

namespace flotilla::metrics {

// The records a run's statistics are made of, as the store returns them.
struct RunRecords {
  std::vector<records::Step> steps;    // every rank's, each rank's in step order
  std::vector<records::Epoch> epochs;  // every rank's
  std::vector<records::End> ends;      // one per rank that ended
  // The largest resident memory the agents' system records saw per rank.
  std::map<int64_t, int64_t> peak_rank_rss;
  bool gpu = false;  // memory from the CUDA allocator (mem_peak) rather than RSS
};

// The shares of a step's time spent in each phase: Σ phase / Σ step_ms over
// the lead rank's steps after warm-up, as fractions.
struct StepShares {
  double data = 0, forward = 0, backward = 0, comm = 0, optimizer = 0;
};

enum class MemorySource { none, gpu_peak, rank_rss, step_rss };
std::string_view name_of(MemorySource source);

struct RunStatistics {
  int64_t steps = 0;                 // the lead rank's step records
  std::optional<double> throughput;  // samples/s of the steady state: run_metrics.h's throughput()
  std::optional<double> step_ms;     // median of the lead rank's step_ms after warm-up
  std::optional<StepShares> step_shares;  // of the lead rank, after warm-up
  std::optional<double> bytes_per_step;   // mean over ranks of each rank's median bytes_sent
  std::optional<double> busbw_gbps;       // median over lead steps that all-reduced
  std::optional<double> message_bytes;    // median payload of one communication operation
  std::optional<double> comm_hidden;      // 1 - Σ comm_ms / Σ comm_busy_ms, in 0..1
  // A pipeline's stage receives over every rank's steps after warm-up:
  // Σ bytes / Σ time from posting a receive to holding its bytes, GB/s (any
  // wait for the sender included: a lower bound on the links' bandwidth),
  // and the mean receive time a rank spends per step, ms.
  std::optional<double> recv_gbps;
  std::optional<double> recv_ms;
  std::optional<int64_t> peak_memory;  // bytes, the largest rank's
  MemorySource memory_source = MemorySource::none;
  std::optional<double> epoch_s;  // median epoch_s, the first left out when ≥ 2
  // The samples of one epoch (the lead rank's steps of its last recorded
  // epoch), and the time they take at the steady throughput: the epoch time
  // of the steady state, so that T(1)/T(N) of two runs over the same data is
  // exactly their speed-up. epoch_s above is the measured one (evaluation
  // excluded, everything else in the epoch included).
  std::optional<double> epoch_samples;
  std::optional<double> steady_epoch_s;
  std::optional<double> run_s;     // the longest rank's elapsed_s
  std::optional<double> acc_test;  // rank 0's last epoch, a fraction
  int64_t epochs = 0;
  int64_t pipeline_stages = 0;                // stages of replica 0; 0 for no pipeline
  std::optional<double> pipeline_efficiency;  // median Σ busy / (stages x step)
  // An `oom` end: the batch size that did not fit.
  std::optional<int64_t> oom_batch_size;
};

RunStatistics run_statistics(const RunRecords& records);

// Between a run and the baseline run; nullopt where either side has no number.
// speed-up = throughput / baseline throughput: T(1)/T(N) for a fixed amount
// of work in the steady state (run_metrics.h's throughput()).
std::optional<double> speedup(std::optional<double> throughput,
                              std::optional<double> baseline_throughput);
// scaling efficiency = speed-up / (ranks / baseline ranks).
std::optional<double> scaling_efficiency(std::optional<double> speedup, int64_t ranks,
                                         int64_t baseline_ranks);

// GPipe's bound on pipeline efficiency with m micro-batches over p stages:
// m / (m + p - 1), i.e. 1 - the bubble (p - 1) / (m + p - 1).
std::optional<double> gpipe_bound(int64_t chunks, int64_t stages);

// Seed 004's split of a run's epoch time against a baseline with fewer
// ranks: compute = T(b) x b / N (the baseline's work shared by N ranks),
// communication = T(N) - compute (never below 0).
struct TimeSplit {
  double compute_s = 0, comm_s = 0;
};
std::optional<TimeSplit> time_split(std::optional<double> epoch_s, int64_t ranks,
                                    std::optional<double> baseline_epoch_s, int64_t baseline_ranks);

// Bytes each rank sends in a ring all-reduce of `payload` bytes over `ranks`:
// 2 N (P - 1) / P.
double ring_allreduce_bytes(double payload, int64_t ranks);
// Seed 004's bandwidth utilisation: the ring volume of an epoch over the
// epoch's communication time, in GB/s (1e9 bytes).
std::optional<double> ring_bandwidth_gbps(std::optional<double> payload_per_step, int64_t ranks,
                                          int64_t steps_per_epoch, std::optional<double> comm_s);

// A mean and its spread (the sample standard deviation, n - 1) over repeats,
// as the seeds' "95.89±0.07"; spread 0 for one value, nullopt for none.
struct MeanSpread {
  double mean = 0, spread = 0;
  int64_t count = 0;
};
std::optional<MeanSpread> mean_and_spread(const std::vector<double>& values);

// One size of an all-reduce sweep (`flotilla nodes bench`).
struct LinkPoint {
  double bytes = 0;
  double busbw_gbps = 0;
};
// The link's busbw at a message of `bytes`: interpolated linearly in
// log2(bytes) between the two sizes around it, the end's value outside the
// sweep. nullopt for an empty sweep or a non-positive size.
std::optional<double> link_busbw_at(std::vector<LinkPoint> sweep, double bytes);
// A run's busbw as a share of the link's at the same size.
std::optional<double> link_utilisation(std::optional<double> run_busbw_gbps,
                                       std::optional<double> link_busbw_gbps);

}  // namespace flotilla::metrics
