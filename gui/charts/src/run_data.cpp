#include "flotilla/charts/run_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace flotilla::charts {
namespace {

using nlohmann::json;

std::optional<double> number(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Pads every column of `columns` to `rows` with NaN.
template <typename Map>
void pad(Map& columns, size_t rows) {
  for (auto& [name, column] : columns)
    if (column.size() < rows) column.resize(rows, kMissing);
}

void add_step(RunData& data, const controller::RecordRow& record, const json& j) {
  const auto step = number(j, "step");
  if (!step) {
    ++data.skipped_records["step records without a numeric \"step\""];
    return;
  }
  auto& rank = data.ranks[record.rank];
  if (rank.rows() == 0) {
    rank.node = record.node;
    rank.rank = record.rank;
  }
  if (rank.rows() > 0 && *step <= rank.step.back()) {
    ++data.skipped_records["step records repeating or going back in steps"];
    return;
  }
  const size_t row = rank.rows();
  rank.step.push_back(*step);
  rank.time.push_back(number(j, "time").value_or(kMissing));
  for (const auto& [key, value] : j.items()) {
    if (key == "type" || key == "step" || key == "time" || key == "rank") continue;
    if (!value.is_number()) {
      ++data.skipped_fields["step." + key + " not a number"];
      continue;
    }
    auto& column = rank.fields[key];
    if (column.size() < row) column.resize(row, kMissing);
    column.push_back(value.get<double>());
  }
  pad(rank.fields, row + 1);
  if (!rank.stage)
    if (const auto stage = number(j, "stage")) {
      rank.stage = int64_t(*stage);
      rank.replica = int64_t(number(j, "replica").value_or(0));
    }
}

void add_system(RunData& data, const controller::RecordRow& record, const json& j) {
  const auto time = number(j, "time");
  if (!time) {
    ++data.skipped_records["system records without a time"];
    return;
  }
  auto& s = data.systems[record.node];
  s.node = record.node;
  if (s.rows() > 0 && *time <= s.time.back()) {
    ++data.skipped_records["system records going back in time"];
    return;
  }
  const size_t row = s.rows();
  s.time.push_back(*time);
  s.cpu_util.push_back(number(j, "cpu_util").value_or(kMissing));
  const auto rx = number(j, "nic_rx"), tx = number(j, "nic_tx");
  auto rate = [&](std::optional<double> now, double last) {
    // A counter that went down was reset (an interface came or went).
    if (!now || !std::isfinite(last) || *now < last || !(*time > s.last_time)) return kMissing;
    return (*now - last) / (*time - s.last_time) / 1e6;
  };
  s.nic_rx_mb_s.push_back(rate(rx, s.last_rx));
  s.nic_tx_mb_s.push_back(rate(tx, s.last_tx));
  s.last_rx = rx.value_or(kMissing);
  s.last_tx = tx.value_or(kMissing);
  s.last_time = *time;
  if (const auto rss = j.find("rank_rss"); rss != j.end() && rss->is_object()) {
    for (const auto& [key, value] : rss->items()) {
      int64_t rank = 0;
      try {
        rank = std::stoll(key);
      } catch (const std::exception&) {
        ++data.skipped_fields["system.rank_rss key not a rank"];
        continue;
      }
      if (!value.is_number()) {
        ++data.skipped_fields["system.rank_rss value not a number"];
        continue;
      }
      auto& column = s.rank_rss[rank];
      if (column.size() < row) column.resize(row, kMissing);
      column.push_back(value.get<double>());
    }
  }
  pad(s.rank_rss, row + 1);
  if (const auto gpus = j.find("gpus"); gpus != j.end() && gpus->is_array()) {
    for (const auto& g : *gpus) {
      const auto index = g.is_object() ? number(g, "index") : std::nullopt;
      if (!index) {
        ++data.skipped_fields["system.gpus entry without an index"];
        continue;
      }
      auto& gpu = s.gpus[int64_t(*index)];
      if (gpu.name.empty() && g.contains("name") && g["name"].is_string())
        gpu.name = g["name"].get<std::string>();
      gpu.util.resize(row, kMissing);
      gpu.mem_used.resize(row, kMissing);
      gpu.util.push_back(number(g, "util").value_or(kMissing));
      gpu.mem_used.push_back(number(g, "mem_used").value_or(kMissing));
      if (const auto total = number(g, "mem_total")) gpu.mem_total = *total;
    }
  }
  for (auto& [index, gpu] : s.gpus) {
    gpu.util.resize(row + 1, kMissing);
    gpu.mem_used.resize(row + 1, kMissing);
  }
}

void add_start(RunData& data, const controller::RecordRow& record, const json& j) {
  StartInfo s;
  s.node = record.node;
  s.rank = record.rank;
  s.world_size = int64_t(number(j, "world_size").value_or(0));
  s.model = j.value("model", "");
  s.dataset = j.value("dataset", "");
  s.device = j.value("device", "");
  s.blocks = int64_t(number(j, "blocks").value_or(0));
  if (const auto balance = j.find("balance"); balance != j.end() && balance->is_array())
    for (const auto& b : *balance)
      if (b.is_number_integer()) s.balance.push_back(b.get<int64_t>());
  s.steps_per_epoch = int64_t(number(j, "steps_per_epoch").value_or(0));
  s.time = number(j, "time").value_or(kMissing);
  data.starts[record.rank] = s;
}

void add_epoch(RunData& data, const controller::RecordRow& record, const json& j) {
  // Every rank reports the same epoch; the lowest rank's speak for the run.
  if (!data.epochs.empty() && record.rank > data.epoch_rank) return;
  if (!data.epochs.empty() && record.rank < data.epoch_rank) data.epochs.clear();
  data.epoch_rank = record.rank;
  EpochPoint e;
  e.epoch = int64_t(number(j, "epoch").value_or(double(data.epochs.size())));
  e.step = number(j, "steps").value_or(kMissing);
  e.loss = number(j, "loss").value_or(kMissing);
  e.acc_train = number(j, "acc_train").value_or(kMissing);
  e.acc_test = number(j, "acc_test").value_or(kMissing);
  e.time = number(j, "time").value_or(kMissing);
  data.epochs.push_back(e);
}

}  // namespace

const std::vector<double>* RankColumns::field(const std::string& name) const {
  const auto it = fields.find(name);
  return it == fields.end() ? nullptr : &it->second;
}

int64_t RunData::lead_rank() const {
  int64_t lead = -1;
  int64_t lead_stage = -1;
  for (const auto& [rank, columns] : ranks) {
    if (columns.stage) {
      if (columns.replica == 0 && *columns.stage > lead_stage)
        lead = rank, lead_stage = *columns.stage;
    } else if (lead_stage < 0 && (lead < 0 || rank < lead)) {
      lead = rank;
    }
  }
  return lead;
}

double RunData::start_time(const std::string& node) const {
  double earliest = kMissing;
  for (const auto& [rank, start] : starts)
    if (start.node == node && std::isfinite(start.time) &&
        !(std::isfinite(earliest) && earliest <= start.time))
      earliest = start.time;
  if (std::isfinite(earliest)) return earliest;
  const auto first = first_time.find(node);
  return first == first_time.end() ? kMissing : first->second;
}

bool RunData::has_times() const {
  for (const auto& [rank, columns] : ranks)
    for (double t : columns.time)
      if (std::isfinite(t)) return true;
  return false;
}

int64_t RunData::step_records() const {
  int64_t n = 0;
  for (const auto& [rank, columns] : ranks) n += int64_t(columns.rows());
  return n;
}

JobShape job_shape_of(const controller::RunRow& run) {
  JobShape shape;
  shape.world_size = std::max<int64_t>(run.world_size, 1);
  const auto config = json::parse(run.config_json, nullptr, false);
  if (!config.is_object()) return shape;
  auto text = [&](const char* key, const char* fallback) {
    const auto it = config.find(key);
    return it != config.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
  };
  shape.strategy = text("strategy", "single");
  shape.device = text("device", "cpu");
  if (const auto c = config.find("compression"); c != config.end() && c->is_object())
    shape.compression = c->value("method", "none");
  else
    shape.compression = "none";
  shape.chunks = std::max<int64_t>(1, int64_t(number(config, "chunks").value_or(1)));
  const auto replicas = std::max<int64_t>(1, int64_t(number(config, "replicas").value_or(1)));
  if (shape.strategy == "ddp") {
    shape.replicas = shape.world_size;
  } else if (shape.strategy == "pipeline") {
    shape.stages = shape.world_size;
  } else if (shape.strategy == "pipeline_ddp") {
    shape.replicas = replicas;
    shape.stages = std::max<int64_t>(1, shape.world_size / replicas);
  }
  return shape;
}

NodeInfo node_info_of(const controller::NodeRow& node) {
  NodeInfo info;
  info.name = node.name;
  info.host = node.host;
  const auto probe = json::parse(node.probe_json.empty() ? "{}" : node.probe_json, nullptr, false);
  if (!probe.is_object()) return info;
  info.memory_bytes = number(probe, "memory_bytes").value_or(kMissing);
  if (const auto gpus = probe.find("gpus"); gpus != probe.end() && gpus->is_array())
    for (const auto& g : *gpus)
      if (g.is_object())
        info.probe_gpus.emplace_back(g.value("name", ""),
                                     number(g, "memory_bytes").value_or(kMissing));
  return info;
}

void add_records(RunData& data, const std::vector<controller::RecordRow>& records) {
  for (const auto& record : records) {
    auto& last = data.last_seq[record.node];
    if (record.seq <= last) continue;
    last = record.seq;
    ++data.records_per_node[record.node];
    const auto j = json::parse(record.body, nullptr, false);
    if (!j.is_object()) {
      ++data.skipped_records[record.type + " records that are not JSON objects"];
      continue;
    }
    if (const auto time = number(j, "time")) {
      auto [newest, first] = data.last_time.try_emplace(record.node, *time);
      if (!first) newest->second = std::max(newest->second, *time);
      if (!data.first_time.count(record.node)) data.first_time[record.node] = *time;
    }
    if (record.type == "step")
      add_step(data, record, j);
    else if (record.type == "system")
      add_system(data, record, j);
    else if (record.type == "start")
      add_start(data, record, j);
    else if (record.type == "epoch")
      add_epoch(data, record, j);
  }
}

}  // namespace flotilla::charts
