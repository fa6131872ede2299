#include "flotilla/protocol/messages.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

namespace flotilla::protocol {
namespace {

using nlohmann::json;

template <typename T>
struct IsVector : std::false_type {};
template <typename E>
struct IsVector<std::vector<E>> : std::true_type {};

// `value` as a T, nullopt when it is not one. Integers must be JSON integers
// within T's range: nlohmann's get<int64_t>() casts 2.5 or 1e300 (undefined
// behaviour for the latter, found by fuzzing the decoder) and get<int>()
// truncates 2^40 without a word.
template <typename T>
std::optional<T> value_as(const json& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (value.is_string()) return value.get<std::string>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (value.is_number()) return value.get<double>();
  } else if constexpr (std::is_same_v<T, bool>) {  // before is_integral, which bool also is
    if (value.is_boolean()) return value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (value.is_number_unsigned()) {
      const auto u = value.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(u);
    } else if (value.is_number_integer()) {
      const auto i = value.get<int64_t>();
      if (i >= std::numeric_limits<T>::min() && i <= std::numeric_limits<T>::max())
        return static_cast<T>(i);
    }
  } else {
    static_assert(IsVector<T>::value,
                  "a field is text, a number, an integer, a boolean or a list of those");
    if (!value.is_array()) return std::nullopt;
    T out;
    for (const auto& element : value) {
      auto e = value_as<typename T::value_type>(element);
      if (!e) return std::nullopt;
      out.push_back(std::move(*e));
    }
    return out;
  }
  return std::nullopt;
}

template <typename T>
T field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) throw DecodeError(std::string("missing field \"") + name + "\"");
  auto value = value_as<T>(*it);
  if (!value)
    throw DecodeError(std::string("field \"") + name + "\" has the wrong type: " + it->dump());
  return std::move(*value);
}

template <typename T>
T optional_field(const json& j, const char* name, T fallback) {
  return j.contains(name) ? field<T>(j, name) : fallback;
}

// One line of JSON. Text that is not UTF-8 (a rank's stderr quoted in a
// run_end, cut at 200 bytes mid-character) gets U+FFFD for its bad bytes:
// nlohmann's default dump() throws, and the message would be lost.
std::string as_line(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json envelope(std::string_view type) {
  return json{{"v", kVersion}, {"type", type}};
}

SlurmInfo slurm_from_json(const json& j) {
  SlurmInfo s{optional_field<std::string>(j, "version", ""),
              optional_field<std::string>(j, "error", ""),
              {},
              {}};
  if (const auto partitions = j.find("partitions"); partitions != j.end() && partitions->is_array())
    for (const auto& p : *partitions)
      s.partitions.push_back(
          {field<std::string>(p, "name"), optional_field<bool>(p, "default", false),
           optional_field<bool>(p, "up", true), optional_field<std::string>(p, "time_limit", ""),
           optional_field<std::vector<std::string>>(p, "nodes", {})});
  if (const auto nodes = j.find("nodes"); nodes != j.end() && nodes->is_array())
    for (const auto& n : *nodes)
      s.nodes.push_back({field<std::string>(n, "name"), optional_field<std::string>(n, "state", ""),
                         optional_field<int64_t>(n, "cpus", 0),
                         optional_field<int64_t>(n, "gpus", 0),
                         optional_field<std::string>(n, "gres", "")});
  return s;
}

// Every message but Record, which encode() writes itself.
struct Encoder {
  json operator()(const Hello& m) const {
    auto j = envelope("hello");
    j["v"] = m.version;
    j["role"] = m.role;
    j["software"] = m.software;
    j["capabilities"] = m.capabilities;
    return j;
  }
  json operator()(const StartRun& m) const {
    auto j = envelope("start");
    j.update({{"run", m.run},
              {"node", m.node},
              {"config", json::parse(m.config_json)},
              {"ranks", m.ranks},
              {"world_size", m.world_size},
              {"master_addr", m.master_addr},
              {"master_port", m.master_port}});
    if (m.mode != RunMode::train) {
      j["mode"] = name_of(m.mode);
      json bench = json::object();
      for (const auto& [name, value] : {std::pair{"min_bytes", m.bench.min_bytes},
                                        {"max_bytes", m.bench.max_bytes},
                                        {"iterations", m.bench.iterations},
                                        {"warmup", m.bench.warmup}})
        if (value > 0) bench[name] = value;
      j["bench"] = bench;
    }
    if (m.resume) j["resume"] = true;
    return j;
  }
  json operator()(const StopRun& m) const {
    auto j = envelope("stop");
    j.update({{"run", m.run}, {"grace_s", m.grace_s}});
    if (!m.why.empty()) j["why"] = m.why;
    return j;
  }
  json operator()(const StatusRequest& m) const {
    auto j = envelope("status");
    j["run"] = m.run;
    return j;
  }
  json operator()(const Resume& m) const {
    auto j = envelope("resume");
    j.update({{"run", m.run}, {"after_seq", m.after_seq}});
    return j;
  }
  json operator()(const Started& m) const {
    auto j = envelope("started");
    j.update({{"run", m.run}, {"pids", m.pids}});
    return j;
  }
  json operator()(const Record&) const { return {}; }
  json operator()(const RunEnd& m) const {
    auto j = envelope("run_end");
    j.update({{"run", m.run}, {"seq", m.seq}, {"outcome", m.outcome}, {"message", m.message}});
    return j;
  }
  json operator()(const StatusReply& m) const {
    auto j = envelope("status_reply");
    j.update(
        {{"run", m.run}, {"state", m.state}, {"last_seq", m.last_seq}, {"live_pids", m.live_pids}});
    return j;
  }
  json operator()(const Probe& m) const {
    auto j = envelope("probe");
    if (m.slurm) j["slurm"] = true;
    return j;
  }
  json operator()(const ProbeReply& m) const {
    auto j = envelope("probe_reply");
    json gpus = json::array();
    for (const auto& g : m.gpus)
      gpus.push_back({{"index", g.index}, {"name", g.name}, {"memory_bytes", g.memory_bytes}});
    j.update({{"os", m.os},
              {"kernel", m.kernel},
              {"hostname", m.hostname},
              {"cpus", m.cpus},
              {"memory_bytes", m.memory_bytes},
              {"disk_free_bytes", m.disk_free_bytes},
              {"free_port", m.free_port},
              {"gpus", gpus}});
    if (m.slurm) j["slurm"] = slurm_json(*m.slurm);
    return j;
  }

  static json slurm_json(const SlurmInfo& s) {
    json partitions = json::array();
    for (const auto& p : s.partitions)
      partitions.push_back({{"name", p.name},
                            {"default", p.is_default},
                            {"up", p.up},
                            {"time_limit", p.time_limit},
                            {"nodes", p.nodes}});
    json nodes = json::array();
    for (const auto& n : s.nodes)
      nodes.push_back({{"name", n.name},
                       {"state", n.state},
                       {"cpus", n.cpus},
                       {"gpus", n.gpus},
                       {"gres", n.gres}});
    return {
        {"version", s.version}, {"error", s.error}, {"partitions", partitions}, {"nodes", nodes}};
  }
  json operator()(const Error& m) const {
    auto j = envelope("error");
    j["message"] = m.message;
    if (!m.run.empty()) j["run"] = m.run;
    return j;
  }
};

}  // namespace

std::string_view name_of(RunMode mode) {
  switch (mode) {
    case RunMode::allreduce_bench:
      return "allreduce_bench";
    case RunMode::block_profile:
      return "block_profile";
    default:
      return "train";
  }
}

std::string encode(const Message& message) {
  if (const auto* r = std::get_if<Record>(&message)) {
    // Records are the stream's bulk: the record object, already checked where it
    // was produced, is spliced in as text rather than parsed again. It goes first
    // so that the envelope's "seq" stays the line's last one (see seq lookups).
    auto j = envelope("record");
    j.update({{"run", r->run}, {"seq", r->seq}, {"node", r->node}, {"rank", r->rank}});
    return "{\"record\":" + r->record_json + "," + as_line(j).substr(1);
  }
  return as_line(std::visit(Encoder{}, message));
}

std::string_view type_of(const Message& message) {
  static constexpr std::string_view kNames[] = {"hello",        "start",   "stop",   "status",
                                                "resume",       "started", "record", "run_end",
                                                "status_reply", "error",   "probe",  "probe_reply"};
  return kNames[message.index()];
}

Message decode(std::string_view line) {
  if (line.size() > kMaxLineBytes)
    throw DecodeError("line of " + std::to_string(line.size()) + " bytes is longer than the " +
                      std::to_string(kMaxLineBytes) + " allowed");
  // nlohmann's lexer ends its input at a NUL: "{...}\0junk" would decode as
  // if the junk were not there. No JSON text holds a raw NUL.
  if (const auto nul = line.find('\0'); nul != std::string_view::npos)
    throw DecodeError("not JSON: a NUL byte at offset " + std::to_string(nul));
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) throw DecodeError("not JSON: " + std::string(line.substr(0, 80)));
  if (!j.is_object()) throw DecodeError("not a JSON object: " + std::string(line.substr(0, 80)));
  const int version = field<int>(j, "v");
  const auto type = field<std::string>(j, "type");
  if (type == "hello") {
    // A hello of another version still decodes, so that the peer can answer clearly.
    return Hello{field<std::string>(j, "role"), optional_field<std::string>(j, "software", ""),
                 optional_field<std::vector<std::string>>(j, "capabilities", {}), version};
  }
  if (version != kVersion)
    throw DecodeError("protocol version " + std::to_string(version) + ", expected " +
                      std::to_string(kVersion));
  if (type == "start") {
    const auto config = j.find("config");
    if (config == j.end() || !config->is_object()) throw DecodeError("missing field \"config\"");
    StartRun start{field<std::string>(j, "run"),
                   optional_field<std::string>(j, "node", "local"),
                   config->dump(),
                   field<std::vector<int64_t>>(j, "ranks"),
                   field<int64_t>(j, "world_size"),
                   optional_field<std::string>(j, "master_addr", "127.0.0.1"),
                   optional_field<int>(j, "master_port", 29500),
                   RunMode::train,
                   {},
                   optional_field<bool>(j, "resume", false)};
    const auto mode = optional_field<std::string>(j, "mode", "train");
    if (mode == name_of(RunMode::allreduce_bench))
      start.mode = RunMode::allreduce_bench;
    else if (mode == name_of(RunMode::block_profile))
      start.mode = RunMode::block_profile;
    else if (mode != name_of(RunMode::train))
      throw DecodeError("field \"mode\": unknown run mode \"" + mode +
                        "\" (known: train, allreduce_bench, block_profile)");
    if (const auto bench = j.find("bench"); bench != j.end()) {
      if (!bench->is_object())
        throw DecodeError("field \"bench\" has the wrong type: " + bench->dump());
      start.bench = {optional_field<int64_t>(*bench, "min_bytes", 0),
                     optional_field<int64_t>(*bench, "max_bytes", 0),
                     optional_field<int64_t>(*bench, "iterations", 0),
                     optional_field<int64_t>(*bench, "warmup", 0)};
    }
    return start;
  }
  if (type == "stop") {
    StopRun stop{field<std::string>(j, "run"), optional_field<double>(j, "grace_s", 5.0),
                 optional_field<std::string>(j, "why", "")};
    // NaN fails both comparisons: refused too.
    if (!(stop.grace_s >= 0 && stop.grace_s <= kMaxGraceSeconds))
      throw DecodeError("field \"grace_s\" must be 0 to " +
                        std::to_string(static_cast<int>(kMaxGraceSeconds)) + " seconds, got " +
                        j["grace_s"].dump());
    return stop;
  }
  if (type == "status") return StatusRequest{field<std::string>(j, "run")};
  if (type == "resume") return Resume{field<std::string>(j, "run"), field<int64_t>(j, "after_seq")};
  if (type == "started")
    return Started{field<std::string>(j, "run"), field<std::vector<int64_t>>(j, "pids")};
  if (type == "record") {
    const auto record = j.find("record");
    if (record == j.end() || !record->is_object()) throw DecodeError("missing field \"record\"");
    const auto record_type = record->find("type");
    return Record{field<std::string>(j, "run"),
                  field<int64_t>(j, "seq"),
                  optional_field<std::string>(j, "node", ""),
                  field<int64_t>(j, "rank"),
                  record->dump(),
                  record_type != record->end() && record_type->is_string()
                      ? record_type->get<std::string>()
                      : std::string()};
  }
  if (type == "run_end")
    return RunEnd{field<std::string>(j, "run"), field<int64_t>(j, "seq"),
                  field<std::string>(j, "outcome"), optional_field<std::string>(j, "message", "")};
  if (type == "status_reply")
    return StatusReply{field<std::string>(j, "run"), field<std::string>(j, "state"),
                       field<int64_t>(j, "last_seq"),
                       optional_field<std::vector<int64_t>>(j, "live_pids", {})};
  if (type == "error")
    return Error{field<std::string>(j, "message"), optional_field<std::string>(j, "run", "")};
  if (type == "probe") return Probe{optional_field<bool>(j, "slurm", false)};
  if (type == "probe_reply") {
    ProbeReply r{field<std::string>(j, "os"),
                 field<std::string>(j, "kernel"),
                 optional_field<std::string>(j, "hostname", ""),
                 field<int64_t>(j, "cpus"),
                 field<int64_t>(j, "memory_bytes"),
                 field<int64_t>(j, "disk_free_bytes"),
                 field<int>(j, "free_port"),
                 {},
                 std::nullopt};
    const auto gpus = j.find("gpus");
    if (gpus != j.end() && gpus->is_array())
      for (const auto& g : *gpus)
        r.gpus.push_back({field<int64_t>(g, "index"), field<std::string>(g, "name"),
                          field<int64_t>(g, "memory_bytes")});
    if (const auto slurm = j.find("slurm"); slurm != j.end() && slurm->is_object())
      r.slurm = slurm_from_json(*slurm);
    return r;
  }
  throw DecodeError("unknown message type \"" + type + "\"");
}

}  // namespace flotilla::protocol
