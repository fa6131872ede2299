#include "flotilla/protocol/metric_records.h"

#include <nlohmann/json.hpp>

namespace flotilla::records {
namespace {
using nlohmann::json;

constexpr std::pair<Outcome, std::string_view> kOutcomes[] = {{Outcome::finished, "finished"},
                                                              {Outcome::failed, "failed"},
                                                              {Outcome::oom, "oom"},
                                                              {Outcome::killed, "killed"}};
}  // namespace

std::string_view name_of(Outcome outcome) {
  for (const auto& [o, name] : kOutcomes)
    if (o == outcome) return name;
  return "?";
}

std::optional<Outcome> outcome_from_name(std::string_view name) {
  for (const auto& [o, n] : kOutcomes)
    if (n == name) return o;
  return std::nullopt;
}

std::string to_line(const Start& r) {
  json j{{"type", "start"},
         {"rank", r.rank},
         {"world_size", r.world_size},
         {"model", r.model},
         {"dataset", r.dataset},
         {"device", r.device},
         {"parameters", r.parameters},
         {"trainable_parameters", r.trainable_parameters},
         {"blocks", r.blocks},
         {"block_parameters", r.block_parameters},
         {"balance", r.balance},
         {"steps_per_epoch", r.steps_per_epoch},
         {"threads", r.threads},
         {"blas", r.blas},
         {"blas_threads", r.blas_threads},
         {"torch_version", r.torch_version},
         {"precision", r.precision}};
  if (!r.engine.empty()) j["engine"] = r.engine;
  if (!r.machine.empty()) j["machine"] = r.machine;
  if (r.cores > 0) j["cores"] = r.cores;
  if (!r.gradient_dtype.empty()) j["gradient_dtype"] = r.gradient_dtype;
  if (!r.boundary_dtype.empty()) j["boundary_dtype"] = r.boundary_dtype;
  if (r.resumed_from_step > 0) j["resumed_from_step"] = r.resumed_from_step;
  return j.dump();
}

std::string to_line(const Step& r) {
  json j{{"type", "step"},
         {"rank", r.rank},
         {"epoch", r.epoch},
         {"step", r.step},
         {"samples", r.samples},
         {"lr", r.lr},
         {"data_ms", r.data_ms},
         {"forward_ms", r.forward_ms},
         {"backward_ms", r.backward_ms},
         {"comm_ms", r.comm_ms},
         {"comm_busy_ms", r.comm_busy_ms},
         {"optimizer_ms", r.optimizer_ms},
         {"step_ms", r.step_ms},
         {"samples_per_s", r.samples_per_s},
         {"bytes_sent", r.bytes_sent},
         {"bytes_recv", r.bytes_recv},
         {"algbw_gbps", r.algbw_gbps},
         {"busbw_gbps", r.busbw_gbps},
         {"comm_per_s", r.comm_per_s},
         {"mem_alloc", r.mem_alloc},
         {"mem_reserved", r.mem_reserved},
         {"mem_peak", r.mem_peak},
         {"frozen_blocks", r.frozen_blocks}};
  if (r.loss) j["loss"] = *r.loss;
  if (r.cached_samples > 0) j["cached_samples"] = r.cached_samples;
  if (r.stage >= 0) {
    j["stage"] = r.stage;
    j["replica"] = r.replica;
    j["busy_ms"] = r.busy_ms;
    j["idle_ms"] = r.idle_ms;
  }
  if (r.compression_ratio > 0) {
    j["compression_ratio"] = r.compression_ratio;
    j["encode_ms"] = r.encode_ms;
    j["decode_ms"] = r.decode_ms;
  }
  if (r.recv_act_bytes > 0) {
    j["recv_act_bytes"] = r.recv_act_bytes;
    j["recv_act_ms"] = r.recv_act_ms;
  }
  if (r.recv_grad_bytes > 0) {
    j["recv_grad_bytes"] = r.recv_grad_bytes;
    j["recv_grad_ms"] = r.recv_grad_ms;
  }
  if (r.loss_scale > 0) {
    j["loss_scale"] = r.loss_scale;
    j["skipped"] = r.skipped;
  }
  return j.dump();
}

std::string to_line(const Epoch& r) {
  json j{{"type", "epoch"},        {"rank", r.rank},       {"epoch", r.epoch},
         {"steps", r.steps},       {"loss", r.loss},       {"acc_train", r.acc_train},
         {"acc_test", r.acc_test}, {"epoch_s", r.epoch_s}, {"samples_per_s", r.samples_per_s}};
  if (r.nic_rx_bytes >= 0 && r.nic_tx_bytes >= 0) {
    j["nic_rx_bytes"] = r.nic_rx_bytes;
    j["nic_tx_bytes"] = r.nic_tx_bytes;
  }
  return j.dump();
}

std::string to_line(const End& r) {
  return json{{"type", "end"},
              {"rank", r.rank},
              {"outcome", name_of(r.outcome)},
              {"message", r.message},
              {"batch_size", r.batch_size},
              {"steps", r.steps},
              {"epochs", r.epochs},
              {"elapsed_s", r.elapsed_s},
              {"wall_time", r.wall_time}}
      .dump();
}

std::string to_line(const Bench& r) {
  return json{{"type", "bench"},
              {"rank", r.rank},
              {"op", r.op},
              {"bytes", r.bytes},
              {"elements", r.elements},
              {"iterations", r.iterations},
              {"time_us", r.time_us},
              {"algbw_gbps", r.algbw_gbps},
              {"busbw_gbps", r.busbw_gbps},
              {"ranks", r.ranks}}
      .dump();
}

std::string to_line(const Transition& r) {
  return json{{"type", "transition"},
              {"rank", r.rank},
              {"epoch", r.epoch},
              {"step", r.step},
              {"frozen_blocks", r.frozen_blocks},
              {"from_stages", r.from_stages},
              {"from_replicas", r.from_replicas},
              {"to_stages", r.to_stages},
              {"to_replicas", r.to_replicas},
              {"from_balance", r.from_balance},
              {"balance", r.balance},
              {"stage", r.stage},
              {"replica", r.replica},
              {"batch_per_replica", r.batch_per_replica},
              {"chunks", r.chunks},
              {"bytes_moved", r.bytes_moved},
              {"ms", r.ms}}
      .dump();
}

}  // namespace flotilla::records
