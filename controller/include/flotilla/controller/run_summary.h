#pragma once

#include <nlohmann/json.hpp>
// What a run amounts to, computed from its stored records alone, so that the
// summary `flotilla run` prints at the end and `flotilla show` prints later
// are the same numbers from the same rows.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct EpochSummary {
  int64_t epoch = 0;
  int64_t steps = 0;  // global step count at the epoch's end
  double loss = 0, acc_train = 0, acc_test = 0, epoch_s = 0, samples_per_s = 0;
};

struct RunSummary {
  RunRow run;
  int64_t records = 0;
  int64_t first_seq = 0, last_seq = 0;
  int64_t steps = 0;  // rank 0's last step
  int64_t epochs = 0;
  double final_loss = 0;
  double acc_train = 0, acc_test = 0;  // the last epoch's
  // The run's throughput (flotilla/protocol/run_metrics.h: the lead rank's
  // samples over their time in the steps after warm-up); nullopt without steps.
  std::optional<double> samples_per_s;
  // Means over the lead rank's step records.
  double step_ms = 0, data_ms = 0, forward_ms = 0, backward_ms = 0, comm_ms = 0, optimizer_ms = 0;
  double bytes_sent_per_step = 0;
  int64_t peak_rank_rss = 0;  // largest RSS of any rank in the agent's system records
  double elapsed_s = 0;       // the longest rank's, from its end record
  std::vector<EpochSummary> epoch_rows;
};

RunSummary summarize(const RunRow& run, const std::vector<RecordRow>& records);

std::string summary_table(const RunSummary& s);
std::string summary_json(const RunSummary& s);
// Every rank's step records as CSV, one row per step and rank, for plotting.
std::string steps_csv(const std::vector<RecordRow>& records);
// One line for a live run: epoch, step, loss, throughput.
// The step records that speak for the run: rank 0's, or in a pipeline the
// last stage of replica 0 (the one rank there that computes the loss).
bool is_lead_step(const nlohmann::json& step_record);

std::string progress_line(const RecordRow& step_record, int64_t steps_per_epoch);

}  // namespace flotilla::controller
