#include "plan/block_profile.h"

#include "flotilla/engine/plan.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "runtime/thread_pools.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

using nlohmann::json;

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("unknown");
}

// FNV-1a, 64 bits: the same name in every build and run (std::hash promises
// neither), a file name, not a defence (the directory is the user's); the
// engine links no Qt and so no QCryptographicHash.
std::string hash_hex(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

std::string default_profile_dir() {
  if (const char* dir = std::getenv("FLOTILLA_PROFILE_DIR"); dir && *dir) return dir;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    return (std::filesystem::path(cache) / "flotilla" / "profiles").string();
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : "/tmp") / ".cache" / "flotilla" / "profiles")
      .string();
}

namespace {

// The config as far as it can change a block's time: everything but what
// cannot (model, data, precision, optimizer, freezing and anything added
// later stay).
json timed_config(const ExperimentConfig& config) {
  auto j = json::parse(to_json(config));
  for (const char* unrelated :
       {"name", "nodes", "ranks_per_node", "replicas", "strategy", "schedule", "balance", "chunks",
        "batch_size", "batch_scope", "epochs", "max_steps", "seed", "save", "limits", "slurm",
        "elastic", "compression", "bucket_mb"})
    j.erase(unrelated);
  if (j.contains("optimizer") && j["optimizer"].is_object()) j["optimizer"].erase("lr");
  return j;
}

}  // namespace

std::string profile_key(const ExperimentConfig& config, int64_t micro_batch, int64_t threads) {
  const json key{{"config", timed_config(config)},
                 {"micro_batch", micro_batch},
                 {"threads", threads},
                 {"host", host_name()},
                 {"cores", usable_cores()},
                 {"torch", torch_version()}};
  return hash_hex(key.dump());
}

std::string node_profile_key(const ExperimentConfig& config, int64_t micro_batch, int64_t threads) {
  // The threads a rank gets are keyed as a number, not as the config says
  // them: a node's profile is measured with its count spelled out.
  auto j = timed_config(config);
  j.erase("threads");
  return hash_hex(json{{"config", j}, {"micro_batch", micro_batch}, {"threads", threads}}.dump());
}

namespace {

std::optional<BlockProfile> profile_of(const json& j, size_t blocks) {
  if (j.is_discarded() || !j.is_object() || !j.contains("blocks") || !j["blocks"].is_array() ||
      j["blocks"].size() != blocks)
    return std::nullopt;
  BlockProfile profile;
  for (const auto& b : j["blocks"]) {
    // A profile from before memory was measured has no held_bytes: measured
    // again.
    const auto bytes = [&b](const char* name) {
      return b.contains(name) && b[name].is_number_integer() ? b[name].get<int64_t>() : -1;
    };
    if (!b.is_object() || !b.contains("forward_ms") || !b.contains("full_ms") ||
        !b["forward_ms"].is_number() || !b["full_ms"].is_number() || bytes("held_bytes") < 0 ||
        bytes("peak_bytes") < 0 || bytes("forward_peak_bytes") < 0 ||
        bytes("evaluation_peak_bytes") < 0)
      return std::nullopt;
    profile.costs.push_back({b["forward_ms"].get<double>(), b["full_ms"].get<double>()});
    predict::BlockMemory memory;
    memory.held = bytes("held_bytes");
    memory.peak = bytes("peak_bytes");
    memory.forward_peak = bytes("forward_peak_bytes");
    memory.evaluation_peak = bytes("evaluation_peak_bytes");
    profile.block_memory.push_back(memory);
  }
  profile.gradient_bytes = j.value("gradient_bytes", int64_t{0});
  profile.optimizer_state_bytes = j.value("optimizer_state_bytes", int64_t{0});
  profile.runtime_bytes = j.value("runtime_bytes", int64_t{0});
  profile.evaluation_batch = j.value("evaluation_batch", int64_t{0});
  profile.optimizer_ms = j.value("optimizer_ms", 0.0);
  profile.measured_ms = j.value("measured_ms", int64_t{0});
  if (j.contains("core_sharing") && j["core_sharing"].is_array())
    for (const auto& s : j["core_sharing"]) {
      if (!s.is_number() || !(s.get<double>() > 0)) return std::nullopt;
      profile.core_sharing.push_back(s.get<double>());
    }
  profile.core_sharing_by = j.value("core_sharing_by", std::string("threads"));
  return profile;
}

json json_of(const BlockProfile& profile) {
  json blocks = json::array();
  for (size_t b = 0; b < profile.costs.size(); ++b) {
    const auto memory =
        b < profile.block_memory.size() ? profile.block_memory[b] : predict::BlockMemory{};
    blocks.push_back({{"forward_ms", profile.costs[b].forward_ms},
                      {"full_ms", profile.costs[b].full_ms},
                      {"held_bytes", memory.held},
                      {"peak_bytes", memory.peak},
                      {"forward_peak_bytes", memory.forward_peak},
                      {"evaluation_peak_bytes", memory.evaluation_peak}});
  }
  return {{"blocks", blocks},
          {"optimizer_ms", profile.optimizer_ms},
          {"gradient_bytes", profile.gradient_bytes},
          {"optimizer_state_bytes", profile.optimizer_state_bytes},
          {"runtime_bytes", profile.runtime_bytes},
          {"evaluation_batch", profile.evaluation_batch},
          {"measured_ms", profile.measured_ms},
          {"core_sharing", profile.core_sharing},
          {"core_sharing_by", profile.core_sharing_by}};
}

}  // namespace

std::string block_profile_json(const BlockProfile& profile) {
  return json_of(profile).dump(1);
}

std::optional<BlockProfile> parse_block_profile(const std::string& text, size_t blocks) {
  return profile_of(json::parse(text, nullptr, false), blocks);
}

std::optional<BlockProfile> load_block_profile(const std::filesystem::path& dir,
                                               const std::string& key, size_t blocks) {
  std::ifstream in(dir / (key + ".json"));
  if (!in) return std::nullopt;
  return profile_of(json::parse(in, nullptr, false), blocks);
}

std::string node_profile_record(const ExperimentConfig& config, int64_t micro_batch,
                                int64_t threads, const BlockProfile& profile) {
  return json{{"node_key", node_profile_key(config, micro_batch, threads)},
              {"micro_batch", micro_batch},
              {"threads", threads},
              {"cores", usable_cores()},
              {"host", host_name()},
              {"torch", torch_version()},
              {"measured_ms", profile.measured_ms},
              {"profile", json_of(profile)}}
      .dump();
}

std::optional<BlockProfile> find_node_profile(const std::filesystem::path& dir,
                                              const std::string& node,
                                              const ExperimentConfig& config, int64_t micro_batch,
                                              size_t blocks, std::string& why_none) {
  std::vector<std::string> others;  // what the node's profiles were measured for
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::ifstream in(entry.path());
    const auto j = json::parse(in, nullptr, false);
    if (!j.is_object() || j.value("node", "") != node || !j.contains("profile")) continue;
    const int64_t cores = j.value("cores", int64_t{0});
    const int64_t threads = threads_per_rank(config, cores > 0 ? cores : 1);
    if (j.value("node_key", "") == node_profile_key(config, micro_batch, threads)) {
      if (auto profile = profile_of(j["profile"], blocks)) return profile;
    }
    others.push_back("micro-batch " + std::to_string(j.value("micro_batch", 0)) + ", " +
                     std::to_string(j.value("threads", 0)) + " thread(s)");
  }
  why_none = "no profile of node " + node + " for this model at micro-batch " +
             std::to_string(micro_batch) + " with the threads a rank gets there";
  if (!others.empty()) {
    why_none += " (it has " + std::to_string(others.size()) + " of other configs, e.g. " +
                others.front() + ")";
  }
  return std::nullopt;
}

void save_block_profile(const std::filesystem::path& dir, const std::string& key,
                        const BlockProfile& profile) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const auto file = dir / (key + ".json");
  const auto temporary = dir / (key + ".json." + std::to_string(getpid()));
  {
    std::ofstream out(temporary);
    if (!out) return;
    out << block_profile_json(profile);
    if (!out) {
      std::filesystem::remove(temporary, error);
      return;
    }
  }
  std::filesystem::rename(temporary, file, error);
  if (error) std::filesystem::remove(temporary, error);
}

}  // namespace flotilla
