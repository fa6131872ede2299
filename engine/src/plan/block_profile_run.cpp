#include "flotilla/engine/block_profile_run.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "flotilla/engine/plan.h"
#include "runtime/thread_pools.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void write_start(const BlockProfileRunOptions& o) {
  records::Start start;
  start.rank = o.env.rank;
  start.world_size = o.env.world_size;
  start.model = std::string(name_of(o.config.model));
  start.dataset = std::string(name_of(o.config.dataset));
  start.device = std::string(name_of(o.config.device));
  start.threads = threads_per_rank(o.config, usable_cores());
  start.blas = blas_info().name;
  start.blas_threads = blas_threads();
  start.torch_version = torch_version();
  start.engine = engine_program();
  start.machine = machine_boot_id();
  start.cores = usable_cores();
  start.precision = std::string(name_of(o.config.precision));
  o.sink->write(records::to_line(start));
}

}  // namespace

BlockProfileRunResult run_block_profile(const BlockProfileRunOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  BlockProfileRunResult result;
  // Rank 0's start record comes with its profile: timing takes a while with
  // nothing to say, and the agent allows a rank's first record its
  // rendezvous time beyond the stall timeout.
  bool start_written = false;
  const auto start_once = [&] {
    if (options.sink && !start_written) write_start(options);
    start_written = true;
  };
  if (options.env.rank != 0) start_once();
  int64_t profiles = 0;
  try {
    if (options.env.rank == 0) {
      PlanOptions plan;
      plan.predict = true;
      plan.remeasure = true;  // what the node has now, not what it kept
      plan.profile_dir = options.profile_dir;
      plan.engine_binary = options.engine_binary;
      plan.on_profile = [&](const std::string& body) {
        auto record = nlohmann::json::parse(body);
        record["type"] = "profile";
        record["rank"] = options.env.rank;
        start_once();
        if (options.sink) options.sink->write(record.dump());
        ++profiles;
      };
      plan_json(options.config, plan);
      if (profiles == 0) throw std::runtime_error("the plan timed no blocks");
    } else {
      result.message = "rank 0 times the blocks; this rank only takes its share of the cores";
    }
  } catch (...) {
    const auto error = std::current_exception();
    result.outcome = is_out_of_memory(error) ? records::Outcome::oom : records::Outcome::failed;
    result.message = error_message(error);
  }
  start_once();
  if (options.sink) {
    records::End end;
    end.rank = options.env.rank;
    end.outcome = result.outcome;
    end.message = result.message;
    end.steps = profiles;
    end.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    end.wall_time = seconds_since_epoch();
    options.sink->write(records::to_line(end));
  }
  return result;
}

}  // namespace flotilla
