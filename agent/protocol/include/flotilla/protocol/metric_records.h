#pragma once
// The records a training rank emits, one JSON object per line. Field names are
// those of DESIGN.md's metric table; the agent adds `run` and `seq` on the way.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flotilla::records {

enum class Outcome { finished, failed, oom, killed };
std::string_view name_of(Outcome outcome);
std::optional<Outcome> outcome_from_name(std::string_view name);

struct Start {
  int64_t rank = 0;
  int64_t world_size = 1;
  std::string model;
  std::string dataset;
  std::string device;
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;
  int64_t blocks = 0;
  int64_t steps_per_epoch = 0;
  int64_t threads = 0;
  std::string torch_version;
};

struct Step {
  int64_t rank = 0;
  int64_t epoch = 0;
  int64_t step = 0;     // 1-based, counted over the whole run
  int64_t samples = 0;  // global samples in this step
  double loss = 0;
  double lr = 0;
  double data_ms = 0;
  double forward_ms = 0;
  double backward_ms = 0;
  double comm_ms = 0;
  double comm_busy_ms = 0;
  double optimizer_ms = 0;
  double step_ms = 0;
  double samples_per_s = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_recv = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  double comm_per_s = 0;
  int64_t mem_alloc = 0;
  int64_t mem_reserved = 0;
  int64_t mem_peak = 0;
};

struct Epoch {
  int64_t rank = 0;
  int64_t epoch = 0;
  int64_t steps = 0;
  double loss = 0;       // mean training loss over the epoch
  double acc_train = 0;  // fractions in 0..1
  double acc_test = 0;
  double epoch_s = 0;
  double samples_per_s = 0;
};

struct End {
  int64_t rank = 0;
  Outcome outcome = Outcome::finished;
  std::string message;
  int64_t batch_size = 0;
  int64_t steps = 0;
  int64_t epochs = 0;
  double elapsed_s = 0;
  double wall_time = 0;  // seconds since the Unix epoch when the outcome was decided
};

std::string to_line(const Start& r);
std::string to_line(const Step& r);
std::string to_line(const Epoch& r);
std::string to_line(const End& r);

}  // namespace flotilla::records
