// The compare table's columns: key, header, decimals and a one-line
// definition each (docs/compare.md has them in full, with formulas).
#include <algorithm>

#include "flotilla/controller/compare.h"

namespace flotilla::controller {

const std::vector<CompareColumn>& compare_columns() {
  static const std::vector<CompareColumn> columns{
      {"run", "run", -1, "run id"},
      {"experiment", "experiment", -1, "experiment name"},
      {"outcome", "outcome", -1,
       "finished, failed, killed, oom (with the batch size that failed), or running (live)"},
      {"model", "model", -1, "config `model`"},
      {"dataset", "dataset", -1, "config `dataset`"},
      {"strategy", "strategy", -1, "config `strategy`"},
      {"nodes", "nodes", 0, "number of nodes"},
      {"ranks", "ranks", 0, "ranks (GPUs): ranks_per_node x nodes"},
      {"batch", "batch/replica", 0,
       "config `batch_size`: per data-parallel replica (its share of a global batch_scope's)"},
      {"global_batch", "global batch", 0, "samples per step of the whole job"},
      {"chunks", "chunks", 0, "pipeline micro-batches (pipelines only)"},
      {"balance", "stage cut", -1,
       "blocks per pipeline stage as run: the config's balance (given) or found by cost"},
      {"steps", "steps", 0, "step records of the lead rank"},
      {"throughput", "samples/s", 1,
       "steady throughput: the job's samples after warm-up / their wall time"},
      {"step_ms", "step ms", 2, "median step_ms of the lead rank after warm-up"},
      {"data_pct", "data %", 1, "data_ms as % of step time"},
      {"forward_pct", "fwd %", 1, "forward_ms as % of step time"},
      {"backward_pct", "bwd %", 1, "backward_ms as % of step time"},
      {"comm_pct", "comm %", 1, "exposed comm_ms as % of step time"},
      {"optimizer_pct", "opt %", 1, "optimizer_ms as % of step time"},
      {"sent_mb", "payload MB/step", 3,
       "bytes a rank hands to communication per step (an all-reduce's payload once), MB"},
      {"wire_mb", "wire MB/step", 3,
       "bytes a rank puts on the wire per step: ring all-reduce 2(P-1)/P x payload, MB"},
      {"busbw_gbps", "busbw GB/s", 3, "median all-reduce bus bandwidth of the lead rank"},
      {"comm_hidden_pct", "comm hidden %", 1, "1 - comm_ms / comm_busy_ms"},
      {"recv_ms", "stage recv ms", 2,
       "a pipeline rank's mean time per step from posting its stage receives (activations from "
       "the stage before, gradients from the stage after) to holding their bytes, any wait for "
       "the sender included"},
      {"recv_gbps", "stage recv GB/s", 3,
       "bytes of every pipeline rank's stage receives over their time after warm-up (recv_ms's "
       "time, the wait for the sender included: a lower bound on the links' bandwidth)"},
      {"peak_mem_mib", "peak mem MiB", 0,
       "largest rank's peak memory (GPU: mem_peak; CPU: RSS), MiB"},
      {"nic_mb_epoch", "NIC rx/tx MB/epoch per node", -1,
       "each node's NIC bytes received/sent in its last epoch's training (the engine's reading "
       "of the node's counters, loopback left out), MB"},
      {"nic_rx_mb_epoch", "NIC rx MB/epoch (node mean)", 1,
       "nic_mb_epoch's received MB, the mean over the run's nodes"},
      {"nic_tx_mb_epoch", "NIC tx MB/epoch (node mean)", 1,
       "nic_mb_epoch's sent MB, the mean over the run's nodes"},
      {"epoch_s", "epoch s", 1, "median epoch time, the first epoch left out when there are more"},
      {"steady_epoch_s", "epoch s (steady)", 2,
       "one epoch's samples / throughput: the epoch at the steady rate"},
      {"run_s", "run s", 1, "whole-run time (a live run: so far)"},
      {"acc_test_pct", "test acc %", 2, "final acc_test"},
      {"acc_test_repeats", "test acc % (repeats)", -1,
       "mean±spread of final acc_test over the compared runs of the same config"},
      {"speedup", "speed-up", 3,
       "T(baseline) / T(run) for the same work at the steady rate: throughput / baseline's"},
      {"scaling_eff", "scaling eff", 3, "speed-up / (ranks / baseline ranks)"},
      {"pipeline_eff_pct", "pipe eff %", 1, "median sum(busy_ms) / (stages x step_ms)"},
      {"pipeline_bound_pct", "GPipe bound %", 1, "m / (m + p - 1)"},
      {"compute_s", "compute s (est)", 2,
       "baseline steady epoch x baseline ranks / ranks (seed 004's T(1)/N)"},
      {"comm_s", "comm s (est)", 2, "steady epoch - compute s (est)"},
      {"ring_gbps", "ring GB/s (est)", 3,
       "wire bytes per step x steps per epoch / comm s (est), GB (1e9 bytes)"},
      {"seed_ring_gbps", "seed 004 GB/s (params)", 3,
       "seed 004's way: 2 N (P-1)/P with N parameters x ceil(epoch samples / batch) / comm s"},
      {"link_busbw_gbps", "link busbw GB/s", 3,
       "measured link busbw (nodes bench) at the run's all-reduce size"},
      {"link_util_pct", "link util %", 1, "busbw / link busbw at the same size"},
      {"predicted_throughput", "samples/s predicted", 1,
       "the job's samples/s `flotilla run --predict` predicted before the run (docs/predict.md)"},
      {"prediction_err_pct", "prediction error %", 1,
       "(predicted - measured) / measured steady samples/s, %"},
      {"predicted_peak_mem_mib", "peak mem MiB predicted", 0,
       "the fullest rank's peak memory `flotilla run --predict` predicted (docs/predict.md), MiB"},
      {"peak_mem_err_pct", "peak mem error %", 1, "(predicted - measured) / measured peak mem, %"},
      {"notes", "notes", -1, "live, no steps, oom, failed, baseline, malformed records"},
  };
  return columns;
}

std::vector<std::string> default_compare_columns() {
  std::vector<std::string> keys;
  for (const auto& c : compare_columns())
    if (c.key != "compute_s" && c.key != "comm_s" && c.key != "ring_gbps" &&
        c.key != "seed_ring_gbps" && c.key != "link_busbw_gbps" && c.key != "nic_mb_epoch" &&
        c.key != "nic_rx_mb_epoch" && c.key != "nic_tx_mb_epoch" && c.key != "steady_epoch_s" &&
        c.key != "recv_ms" && c.key != "recv_gbps" && c.key != "predicted_throughput" &&
        c.key != "prediction_err_pct" && c.key != "predicted_peak_mem_mib" &&
        c.key != "peak_mem_err_pct")
      keys.push_back(c.key);
  return keys;
}

const CompareColumn* find_compare_column(std::string_view key) {
  const auto& columns = compare_columns();
  const auto it = std::find_if(columns.begin(), columns.end(),
                               [&](const CompareColumn& c) { return c.key == key; });
  return it == columns.end() ? nullptr : &*it;
}

}  // namespace flotilla::controller
