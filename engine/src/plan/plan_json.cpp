// The plan as JSON: field names and meanings are docs/plan.md's.
#include <nlohmann/json.hpp>

#include "flotilla/engine/plan.h"
#include "plan/run_plan.h"

namespace flotilla {
namespace {

using nlohmann::json;

json transfer_json(const TransferPlan& t) {
  return {{"sent", t.sent},
          {"fp32_bytes", t.fp32_bytes},
          {"wire_bytes", t.wire_bytes},
          {"fp32_bytes_per_step", t.fp32_bytes_per_step},
          {"wire_bytes_per_step", t.wire_bytes_per_step}};
}

json prediction_json(const PredictionPlan& p) {
  json stages = json::array();
  for (const auto& s : p.stages)
    stages.push_back({{"forward_ms", s.forward_ms},
                      {"backward_ms", s.backward_ms},
                      {"optimizer_ms", s.optimizer_ms},
                      {"allreduce_ms", s.allreduce_ms},
                      {"peak_memory_bytes", s.peak_memory_bytes},
                      {"training_memory_bytes", s.training_memory_bytes},
                      {"evaluation_memory_bytes", s.evaluation_memory_bytes}});
  return {
      {"step_ms", p.step.step_ms},
      {"samples_per_step", p.samples_per_step},
      {"samples_per_s", p.samples_per_s},
      {"compute_ms", p.step.compute_ms},
      {"exposed_comm_ms", p.step.exposed_comm_ms},
      {"bubble_fraction", p.step.bubble_fraction},
      {"micro_batch", p.micro_batch},
      {"peak_memory_bytes", p.memory.peak_bytes},
      {"memory",
       {{"measured_as", p.memory.measured_as},
        {"loaded_bytes", p.memory.loaded_bytes},
        {"loaded_peak_bytes", p.memory.loaded_peak_bytes},
        {"runtime_bytes", p.memory.runtime_bytes}}},
      {"stages", std::move(stages)},
      {"boundary_ms", p.boundary_ms},
      {"codec_ms", p.codec_ms},
      {"links", p.links.empty() ? json(nullptr) : json(p.links)},
      {"core_sharing", {{"ranks", p.ranks_sharing_cores}, {"slowdown", p.core_sharing_slowdown}}},
      {"block_costs",
       {{"source", p.block_costs},
        {"measured_ms", p.block_costs_measured_ms},
        {"node", p.block_costs_node.empty() ? json(nullptr) : json(p.block_costs_node)},
        {"profile", p.profile_file.empty() ? json(nullptr) : json(p.profile_file)}}},
      {"notes", p.notes},
      {"took_ms", p.took_ms}};
}

json to_json(const RunPlan& p) {
  json blocks = json::array();
  for (const auto& b : p.blocks)
    blocks.push_back({{"index", b.index},
                      {"name", b.name},
                      {"kind", b.kind},
                      {"parameters", b.parameters},
                      {"trainable", b.trainable}});
  json stages = json::array();
  for (const auto& s : p.stages) {
    json stage{{"stage", s.stage},
               {"first_block", s.first_block},
               {"blocks", s.blocks},
               {"parameters", s.parameters},
               {"trainable", s.trainable},
               {"allreduce", nullptr},
               {"bytes_sent_per_step", s.bytes_sent_per_step},
               {"bytes_recv_per_step", s.bytes_recv_per_step}};
    if (s.allreduce)
      stage["allreduce"] = {{"ranks", s.allreduce->ranks},
                            {"buckets", s.allreduce->bucket_bytes.size()},
                            {"bucket_bytes", s.allreduce->bucket_bytes},
                            {"bytes_per_step", s.allreduce->bytes_per_step}};
    stages.push_back(std::move(stage));
  }
  json ranks = json::array();
  for (const auto& r : p.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"node_index", r.node_index},
                     {"node", r.node},
                     {"local_rank", r.local_rank},
                     {"stage", r.stage},
                     {"replica", r.replica}});
  json boundaries = json::array();
  for (const auto& b : p.boundaries)
    boundaries.push_back({{"boundary", b.boundary},
                          {"from_stage", b.boundary},
                          {"to_stage", b.boundary + 1},
                          {"sample_shape", b.sample_shape},
                          {"shape", b.shape},
                          {"elements", b.elements},
                          {"activations", transfer_json(b.activations)},
                          {"gradients", transfer_json(b.gradients)}});
  json balance{{"blocks_per_stage", p.balance}, {"source", p.balance_source}};
  if (!p.block_ms.empty()) {
    balance["block_ms"] = p.block_ms;
    balance["took_ms"] = p.measure_ms;
  }
  json elastic = json::array();
  for (const auto& e : p.elastic)
    elastic.push_back({{"frozen_blocks", e.frozen_blocks},
                       {"at_step", e.at_step > 0 ? json(e.at_step) : json(nullptr)},
                       {"stages", e.layout.stages},
                       {"replicas", e.layout.replicas},
                       {"balance", e.layout.balance}});
  return {
      {"type", "plan"},
      {"name", p.name},
      {"model", p.model},
      {"dataset", p.dataset},
      {"input", {{"sample_shape", p.input_shape}, {"vocab", p.vocab}, {"classes", p.classes}}},
      {"blocks", std::move(blocks)},
      {"parameters", p.parameters},
      {"trainable_parameters", p.trainable},
      {"frozen_blocks", p.frozen_blocks},
      {"strategy", p.strategy},
      {"device", p.device},
      {"world_size", p.layout.world_size},
      {"replicas", p.layout.replicas},
      {"stages", p.layout.stages},
      {"schedule", p.layout.pipelined ? json(p.schedule) : json(nullptr)},
      {"batch_size", p.batch_size},
      {"global_batch", p.batch_size * p.layout.replicas},
      {"chunks", p.chunks},
      {"micro_batch_sizes", p.micro_batch_sizes},
      {"balance", std::move(balance)},
      {"codec", p.codec},
      {"elastic", p.elastic_costs.empty() ? json(nullptr)
                                          : json{{"costs", p.elastic_costs}, {"layouts", elastic}}},
      {"stage_plans", std::move(stages)},
      {"ranks", std::move(ranks)},
      {"boundaries", std::move(boundaries)},
      {"prediction", p.prediction ? prediction_json(*p.prediction) : json(nullptr)},
      {"elapsed_ms", p.elapsed_ms}};
}

}  // namespace

std::string plan_json(const ExperimentConfig& config, const PlanOptions& options) {
  return to_json(make_run_plan(config, options)).dump(2);
}

}  // namespace flotilla
