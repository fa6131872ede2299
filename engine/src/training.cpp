#include "flotilla/engine/training.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "flotilla/protocol/rank_placement.h"
#include "precision/mixed_precision.h"
#include "runtime/thread_pools.h"
#include "torch_adapter.h"
#include "trainer.h"

namespace flotilla {
namespace {

int64_t env_integer(const std::function<const char*(const char*)>& lookup, const char* name,
                    int64_t fallback, int64_t min, int64_t max) {
  const char* text = lookup(name);
  if (!text || !*text) return fallback;
  int64_t value = 0;
  const char* end = text + std::strlen(text);
  auto [p, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || p != end || value < min || value > max)
    throw ConfigError({std::string(name) + ": expected an integer in " + std::to_string(min) +
                       ".." + std::to_string(max) + ", got \"" + text + "\""});
  return value;
}

}  // namespace

DistributedEnv distributed_env(const std::function<const char*(const char*)>& lookup) {
  DistributedEnv env;
  env.world_size = env_integer(lookup, "WORLD_SIZE", 1, 1, 1 << 20);
  env.rank = env_integer(lookup, "RANK", 0, 0, env.world_size - 1);
  env.local_rank = env_integer(lookup, "LOCAL_RANK", env.rank, 0, 1 << 20);
  env.master_port = static_cast<int>(env_integer(lookup, "MASTER_PORT", env.master_port, 1, 65535));
  if (const char* addr = lookup("MASTER_ADDR"); addr && *addr) env.master_addr = addr;
  return env;
}

std::unique_ptr<FileRecordSink> FileRecordSink::open(const std::string& target) {
  if (target == "-") return std::make_unique<FileRecordSink>(stdout);
  if (target.rfind("fd:", 0) == 0) {
    int fd = -1;
    auto [p, ec] = std::from_chars(target.data() + 3, target.data() + target.size(), fd);
    std::FILE* file =
        (ec == std::errc() && p == target.data() + target.size()) ? fdopen(fd, "a") : nullptr;
    if (!file) throw std::runtime_error("--records " + target + ": not an open file descriptor");
    return std::make_unique<FileRecordSink>(file, true);
  }
  std::FILE* file = std::fopen(target.c_str(), "a");
  if (!file)
    throw std::runtime_error("--records " + target +
                             ": cannot open for writing: " + std::strerror(errno));
  return std::make_unique<FileRecordSink>(file, true);
}

FileRecordSink::~FileRecordSink() {
  if (owned_) std::fclose(file_);
}

void FileRecordSink::write(std::string_view line) {
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);
}

std::vector<std::string> unsupported_features(const ExperimentConfig& c) {
  std::vector<std::string> problems;
  if (c.device == DeviceKind::cuda && !cuda_usable())
    problems.push_back(cuda_compiled() ? "device: \"cuda\" requested, but no GPU is visible"
                                       : "device: \"cuda\" requested, but this LibTorch (" +
                                             torch_version() + ") was built without CUDA");
  else if (c.precision != Precision::fp32) {
    const bool cuda = c.device == DeviceKind::cuda;
    if (const auto why = autocast_problem(cuda, compute_dtype(c.precision)); !why.empty())
      problems.push_back("precision: \"" + std::string(name_of(c.precision)) + "\" on " +
                         (cuda ? "CUDA" : "the CPU") + " needs autocast to " +
                         dtype_name(compute_dtype(c.precision)) + ", which this LibTorch (" +
                         torch_version() + ") cannot do there: " + why +
                         (cuda ? "" : "; use bf16 on the CPU, or fp16 on a GPU"));
  }
  return problems;
}

TrainResult train(const TrainOptions& given) {
  // A rank trains its replica's share of a global batch.
  TrainOptions options = given;
  options.config = with_replica_batch(given.config);
  TrainResult result;
  bool reported = false;
  // The rank's outcome and its end record, stamped with when it decided.
  auto report = [&](const std::exception_ptr& error) {
    const double decided_at =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (error) {
      result.outcome = is_out_of_memory(error) ? records::Outcome::oom : records::Outcome::failed;
      result.message = error_message(error);
      if (result.outcome == records::Outcome::oom)
        result.message += " (batch_size " + std::to_string(options.config.batch_size) + ")";
    }
    if (options.sink) {
      records::End end;
      end.rank = options.env.rank;
      end.outcome = result.outcome;
      end.message = result.message;
      end.batch_size = options.config.batch_size;
      end.steps = result.steps;
      end.epochs = result.epochs;
      end.elapsed_s = result.elapsed_s;
      end.wall_time = decided_at;
      options.sink->write(records::to_line(end));
    }
    reported = true;
  };
  std::exception_ptr error;
  try {
    if (auto problems = unsupported_features(options.config); !problems.empty())
      throw ConfigError(problems);
    if (options.env.world_size != options.config.world_size())
      throw ConfigError(
          {"WORLD_SIZE: " + std::to_string(options.env.world_size) +
           " ranks from the environment, but the config's ranks_per_node x nodes is " +
           std::to_string(options.config.world_size())});
    // Both compute pools sized before the first tensor operation.
    set_compute_threads(threads_per_rank(options.config, usable_cores()));
    Trainer trainer(options);
    try {
      result = trainer.run();
    } catch (...) {
      // Said while the trainer still lives: its destruction closes the
      // process group's connections, the peers that see them close fail in
      // turn, and their supervisor then stops this rank. This rank's failure,
      // the cause, must be on record with its time before any of that.
      report(std::current_exception());
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (!reported) report(error);
  return result;
}

std::string summary_table(const ExperimentConfig& c, const TrainResult& r) {
  std::ostringstream out;
  out << std::fixed;
  auto row = [&](const std::string& name, const std::string& value) {
    out << "  " << std::left << std::setw(22) << name << value << "\n";
  };
  auto num = [](double v, int precision) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(precision) << v;
    return s.str();
  };
  out << "Run \"" << c.name << "\": " << records::name_of(r.outcome) << "\n";
  if (!r.message.empty()) row("message", r.message);
  row("model / dataset", std::string(name_of(c.model)) + " / " + std::string(name_of(c.dataset)));
  row("parameters", std::to_string(r.parameters));
  if (!r.blas.empty())
    row("threads", std::to_string(r.threads) + " intra-op, " + std::to_string(r.blas_threads) +
                       " BLAS: " + r.blas);
  row("batch size", c.batch_scope == BatchScope::global
                        ? std::to_string(c.batch_size) + " in all, " +
                              std::to_string(replica_batch_size(c)) + " a replica"
                        : std::to_string(c.batch_size));
  if (c.precision != Precision::fp32) row("precision", std::string(name_of(c.precision)));
  row("steps / epochs", std::to_string(r.steps) + " / " + std::to_string(r.epochs));
  // A run that never finished an epoch, or never stepped, has no figures:
  // a dash, not a zero that reads like a measurement.
  const std::string none = "—";
  row("train accuracy", r.epochs > 0 ? num(100 * r.acc_train, 2) + " %" : none);
  row("test accuracy", r.epochs > 0 ? num(100 * r.acc_test, 2) + " %" : none);
  row("throughput",
      r.steps > 0 ? num(r.samples_per_s, 1) + " samples/s (steady, after warm-up)" : none);
  row("step time", r.step_ms > 0 ? num(r.step_ms, 2) + " ms = data " + num(r.data_ms, 2) +
                                       " + forward " + num(r.forward_ms, 2) + " + backward " +
                                       num(r.backward_ms, 2) + " + comm " + num(r.comm_ms, 2) +
                                       " + optimizer " + num(r.optimizer_ms, 2)
                                 : none);
  row("wall time", num(r.elapsed_s, 1) + " s");
  return out.str();
}

}  // namespace flotilla
