#pragma once
// Each rank record's fields, in the order docs/records.md lists them: the one
// table that the writer (to_line), the reader (*_from_line), `flotilla show
// --format csv` and the docs follow (a test holds docs/records.md to it).
//
// visit_fields(record, visit) calls visit(name, member, written) for every
// field of the record: `member` is a reference into it (const where the
// record is), `written` whether the writer puts the field in the line: a
// field of one kind of run only (pipelines, compressed links, fp16, a resumed
// run) is left out of the others' lines, and a reader finds the struct's
// default there.

#include <string_view>
#include <type_traits>
#include <vector>

#include "flotilla/protocol/metric_records.h"

namespace flotilla::records {

template <class R, class Record>
using if_record = std::enable_if_t<std::is_same_v<std::remove_const_t<R>, Record>, int>;

template <class R, class Visit, if_record<R, Start> = 0>
void visit_fields(R& r, Visit&& visit) {
  visit("rank", r.rank, true);
  visit("world_size", r.world_size, true);
  visit("model", r.model, true);
  visit("dataset", r.dataset, true);
  visit("device", r.device, true);
  visit("parameters", r.parameters, true);
  visit("trainable_parameters", r.trainable_parameters, true);
  visit("blocks", r.blocks, true);
  visit("block_parameters", r.block_parameters, true);
  visit("balance", r.balance, true);
  visit("steps_per_epoch", r.steps_per_epoch, true);
  visit("threads", r.threads, true);
  visit("blas", r.blas, true);
  visit("blas_threads", r.blas_threads, true);
  visit("torch_version", r.torch_version, true);
  visit("engine", r.engine, !r.engine.empty());
  visit("machine", r.machine, !r.machine.empty());
  visit("cores", r.cores, r.cores > 0);
  visit("precision", r.precision, true);
  visit("gradient_dtype", r.gradient_dtype, !r.gradient_dtype.empty());
  visit("boundary_dtype", r.boundary_dtype, !r.boundary_dtype.empty());
  visit("resumed_from_step", r.resumed_from_step, r.resumed_from_step > 0);
}

template <class R, class Visit, if_record<R, Step> = 0>
void visit_fields(R& r, Visit&& visit) {
  visit("rank", r.rank, true);
  visit("epoch", r.epoch, true);
  visit("step", r.step, true);
  visit("samples", r.samples, true);
  visit("loss", r.loss, r.loss.has_value());
  visit("lr", r.lr, true);
  visit("data_ms", r.data_ms, true);
  visit("forward_ms", r.forward_ms, true);
  visit("backward_ms", r.backward_ms, true);
  visit("comm_ms", r.comm_ms, true);
  visit("comm_busy_ms", r.comm_busy_ms, true);
  visit("optimizer_ms", r.optimizer_ms, true);
  visit("step_ms", r.step_ms, true);
  visit("samples_per_s", r.samples_per_s, true);
  visit("bytes_sent", r.bytes_sent, true);
  visit("bytes_recv", r.bytes_recv, true);
  visit("algbw_gbps", r.algbw_gbps, true);
  visit("busbw_gbps", r.busbw_gbps, true);
  visit("comm_per_s", r.comm_per_s, true);
  visit("mem_alloc", r.mem_alloc, true);
  visit("mem_reserved", r.mem_reserved, true);
  visit("mem_peak", r.mem_peak, true);
  visit("frozen_blocks", r.frozen_blocks, true);
  visit("cached_samples", r.cached_samples, r.cached_samples > 0);
  const bool pipeline = r.stage >= 0;
  visit("stage", r.stage, pipeline);
  visit("replica", r.replica, pipeline);
  visit("busy_ms", r.busy_ms, pipeline);
  visit("idle_ms", r.idle_ms, pipeline);
  const bool compressed = r.compression_ratio > 0;
  visit("compression_ratio", r.compression_ratio, compressed);
  visit("encode_ms", r.encode_ms, compressed);
  visit("decode_ms", r.decode_ms, compressed);
  visit("recv_act_bytes", r.recv_act_bytes, r.recv_act_bytes > 0);
  visit("recv_act_ms", r.recv_act_ms, r.recv_act_bytes > 0);
  visit("recv_grad_bytes", r.recv_grad_bytes, r.recv_grad_bytes > 0);
  visit("recv_grad_ms", r.recv_grad_ms, r.recv_grad_bytes > 0);
  visit("loss_scale", r.loss_scale, r.loss_scale > 0);
  visit("skipped", r.skipped, r.loss_scale > 0);
}

template <class R, class Visit, if_record<R, Epoch> = 0>
void visit_fields(R& r, Visit&& visit) {
  visit("rank", r.rank, true);
  visit("epoch", r.epoch, true);
  visit("steps", r.steps, true);
  visit("loss", r.loss, true);
  visit("acc_train", r.acc_train, true);
  visit("acc_test", r.acc_test, true);
  visit("epoch_s", r.epoch_s, true);
  visit("samples_per_s", r.samples_per_s, true);
  const bool nic = r.nic_rx_bytes >= 0 && r.nic_tx_bytes >= 0;
  visit("nic_rx_bytes", r.nic_rx_bytes, nic);
  visit("nic_tx_bytes", r.nic_tx_bytes, nic);
}

template <class R, class Visit, if_record<R, End> = 0>
void visit_fields(R& r, Visit&& visit) {
  visit("rank", r.rank, true);
  visit("outcome", r.outcome, true);
  visit("message", r.message, true);
  visit("batch_size", r.batch_size, true);
  visit("steps", r.steps, true);
  visit("epochs", r.epochs, true);
  visit("elapsed_s", r.elapsed_s, true);
  visit("wall_time", r.wall_time, true);
}

template <class R, class Visit, if_record<R, Bench> = 0>
void visit_fields(R& r, Visit&& visit) {
  visit("rank", r.rank, true);
  visit("op", r.op, true);
  visit("bytes", r.bytes, true);
  visit("elements", r.elements, true);
  visit("iterations", r.iterations, true);
  visit("time_us", r.time_us, true);
  visit("algbw_gbps", r.algbw_gbps, true);
  visit("busbw_gbps", r.busbw_gbps, true);
  visit("ranks", r.ranks, true);
}

template <class R, class Visit, if_record<R, Transition> = 0>
void visit_fields(R& r, Visit&& visit) {
  visit("rank", r.rank, true);
  visit("epoch", r.epoch, true);
  visit("step", r.step, true);
  visit("frozen_blocks", r.frozen_blocks, true);
  visit("from_stages", r.from_stages, true);
  visit("from_replicas", r.from_replicas, true);
  visit("to_stages", r.to_stages, true);
  visit("to_replicas", r.to_replicas, true);
  visit("from_balance", r.from_balance, true);
  visit("balance", r.balance, true);
  visit("stage", r.stage, true);
  visit("replica", r.replica, true);
  visit("batch_per_replica", r.batch_per_replica, true);
  visit("chunks", r.chunks, true);
  visit("bytes_moved", r.bytes_moved, true);
  visit("ms", r.ms, true);
}

// The rank record types, as their lines' "type" names them.
inline constexpr std::string_view kRecordTypes[] = {"start", "step",  "epoch",
                                                    "end",   "bench", "transition"};

// The fields of the records of `type` (one of kRecordTypes), in the table's
// order; empty for any other type.
std::vector<std::string_view> field_names(std::string_view type);

}  // namespace flotilla::records
