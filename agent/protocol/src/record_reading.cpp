#include "flotilla/protocol/record_reading.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace flotilla::records {
namespace {

using nlohmann::json;

// A record's fields, read with the struct's value as the default; the first
// field present with the wrong type makes the whole record unreadable.
class Fields {
 public:
  Fields(std::string_view line, std::string_view type) {
    object_ = json::parse(line, nullptr, false);
    // Not value("type", ...): it throws when "type" is not text (found by fuzzing).
    const auto found = object_.is_object() ? object_.find("type") : object_.end();
    ok_ = object_.is_object() && found != object_.end() && found->is_string() &&
          found->get_ref<const std::string&>() == type;
  }
  bool ok() const { return ok_; }
  bool has(const char* name) const { return object_.contains(name); }
  const json& object() const { return object_; }

  template <typename T>
  void read(const char* name, T& into) {
    const auto it = object_.find(name);
    if (!ok_ || it == object_.end()) return;
    if constexpr (std::is_same_v<T, bool>) {  // before is_integral, which bool also is
      if (!it->is_boolean()) return fail();
      into = it->get<bool>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) return fail();
      into = it->get<std::string>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer() && !it->is_number_unsigned()) return fail();
      into = it->get<T>();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!it->is_number()) return fail();
      into = it->get<T>();
    } else {
      if (!it->is_array()) return fail();
      into.clear();
      for (const auto& v : *it) {
        if (!v.is_number_integer()) return fail();
        into.push_back(v.get<int64_t>());
      }
    }
  }

 private:
  void fail() { ok_ = false; }
  json object_;
  bool ok_ = false;
};

}  // namespace

std::optional<Start> start_from_line(std::string_view line) {
  Fields f(line, "start");
  Start r;
  f.read("rank", r.rank);
  f.read("world_size", r.world_size);
  f.read("model", r.model);
  f.read("dataset", r.dataset);
  f.read("device", r.device);
  f.read("parameters", r.parameters);
  f.read("trainable_parameters", r.trainable_parameters);
  f.read("blocks", r.blocks);
  f.read("block_parameters", r.block_parameters);
  f.read("balance", r.balance);
  f.read("steps_per_epoch", r.steps_per_epoch);
  f.read("threads", r.threads);
  f.read("torch_version", r.torch_version);
  f.read("engine", r.engine);
  f.read("machine", r.machine);
  f.read("cores", r.cores);
  f.read("precision", r.precision);
  f.read("gradient_dtype", r.gradient_dtype);
  f.read("boundary_dtype", r.boundary_dtype);
  f.read("resumed_from_step", r.resumed_from_step);
  if (!f.ok()) return std::nullopt;
  return r;
}

std::optional<Step> step_from_line(std::string_view line) {
  Fields f(line, "step");
  Step r;
  f.read("rank", r.rank);
  f.read("epoch", r.epoch);
  f.read("step", r.step);
  f.read("samples", r.samples);
  r.loss = std::nullopt;
  if (f.has("loss")) {
    double loss = 0;
    f.read("loss", loss);
    r.loss = loss;
  }
  f.read("lr", r.lr);
  f.read("data_ms", r.data_ms);
  f.read("forward_ms", r.forward_ms);
  f.read("backward_ms", r.backward_ms);
  f.read("comm_ms", r.comm_ms);
  f.read("comm_busy_ms", r.comm_busy_ms);
  f.read("optimizer_ms", r.optimizer_ms);
  f.read("step_ms", r.step_ms);
  f.read("samples_per_s", r.samples_per_s);
  f.read("bytes_sent", r.bytes_sent);
  f.read("bytes_recv", r.bytes_recv);
  f.read("algbw_gbps", r.algbw_gbps);
  f.read("busbw_gbps", r.busbw_gbps);
  f.read("comm_per_s", r.comm_per_s);
  f.read("mem_alloc", r.mem_alloc);
  f.read("mem_reserved", r.mem_reserved);
  f.read("mem_peak", r.mem_peak);
  f.read("frozen_blocks", r.frozen_blocks);
  f.read("cached_samples", r.cached_samples);
  f.read("stage", r.stage);
  f.read("replica", r.replica);
  f.read("busy_ms", r.busy_ms);
  f.read("idle_ms", r.idle_ms);
  f.read("compression_ratio", r.compression_ratio);
  f.read("encode_ms", r.encode_ms);
  f.read("recv_act_bytes", r.recv_act_bytes);
  f.read("recv_act_ms", r.recv_act_ms);
  f.read("recv_grad_bytes", r.recv_grad_bytes);
  f.read("recv_grad_ms", r.recv_grad_ms);
  f.read("decode_ms", r.decode_ms);
  f.read("loss_scale", r.loss_scale);
  f.read("skipped", r.skipped);
  if (!f.ok()) return std::nullopt;
  return r;
}

std::optional<Epoch> epoch_from_line(std::string_view line) {
  Fields f(line, "epoch");
  Epoch r;
  f.read("rank", r.rank);
  f.read("epoch", r.epoch);
  f.read("steps", r.steps);
  f.read("loss", r.loss);
  f.read("acc_train", r.acc_train);
  f.read("acc_test", r.acc_test);
  f.read("epoch_s", r.epoch_s);
  f.read("samples_per_s", r.samples_per_s);
  f.read("nic_rx_bytes", r.nic_rx_bytes);
  f.read("nic_tx_bytes", r.nic_tx_bytes);
  if (!f.ok()) return std::nullopt;
  return r;
}

std::optional<End> end_from_line(std::string_view line) {
  Fields f(line, "end");
  End r;
  std::string outcome = "finished";
  f.read("rank", r.rank);
  f.read("outcome", outcome);
  f.read("message", r.message);
  f.read("batch_size", r.batch_size);
  f.read("steps", r.steps);
  f.read("epochs", r.epochs);
  f.read("elapsed_s", r.elapsed_s);
  f.read("wall_time", r.wall_time);
  const auto parsed = outcome_from_name(outcome);
  if (!f.ok() || !parsed) return std::nullopt;
  r.outcome = *parsed;
  return r;
}

std::optional<std::map<int64_t, int64_t>> rank_rss_from_line(std::string_view line) {
  Fields f(line, "system");
  if (!f.ok()) return std::nullopt;
  std::map<int64_t, int64_t> rss;
  const auto it = f.object().find("rank_rss");
  if (it == f.object().end()) return rss;
  if (!it->is_object()) return std::nullopt;
  for (const auto& [rank, bytes] : it->items()) {
    int64_t r = 0;
    const auto [end, error] = std::from_chars(rank.data(), rank.data() + rank.size(), r);
    if (error != std::errc() || end != rank.data() + rank.size()) return std::nullopt;
    if (!bytes.is_number_integer()) return std::nullopt;
    rss[r] = bytes.get<int64_t>();
  }
  return rss;
}

bool is_lead(const Step& step) {
  if (!step.loss) return false;
  if (step.stage >= 0) return step.replica == 0;
  return step.rank == 0;
}

}  // namespace flotilla::records
