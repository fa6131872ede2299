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
  ++rank.records;
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
  if (const auto stage = number(j, "stage")) {
    rank.last_stage = int64_t(*stage);
    rank.last_replica = int64_t(number(j, "replica").value_or(0));
    if (!rank.stage) {
      rank.stage = rank.last_stage;
      rank.replica = rank.last_replica;
    }
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
      if (!(s.rank_rss_peak >= column.back())) s.rank_rss_peak = column.back();
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

void add_transition(RunData& data, const controller::RecordRow& record, const json& j) {
  const auto step = number(j, "step");
  if (!step) {
    ++data.skipped_records["transition records without a step"];
    return;
  }
  for (const auto& known : data.layout_changes)
    if (known.step == int64_t(*step)) return;  // another rank's record of it
  LayoutChange change;
  change.step = int64_t(*step);
  change.time = number(j, "time").value_or(kMissing);
  change.node = record.node;
  const auto layout = [&](const char* stages, const char* replicas) {
    return std::to_string(int64_t(number(j, stages).value_or(0))) + "x" +
           std::to_string(int64_t(number(j, replicas).value_or(0)));
  };
  change.words =
      layout("from_stages", "from_replicas") + " \u2192 " + layout("to_stages", "to_replicas");
  data.layout_changes.push_back(change);
  std::sort(data.layout_changes.begin(), data.layout_changes.end(),
            [](const auto& a, const auto& b) { return a.step < b.step; });
}

// Rows [0, end) of `columns` (all of one length) regrouped by bucket,
// floor(key / width): the rows of a bucket become one holding, per column,
// the mean of its finite values, each row weighing what it holds (`weights`
// for the first `folded` rows, which are buckets already; 1 for the others).
// A value missing in part of a bucket is the mean of the rest. The rows from
// `end` on move up behind the buckets. Returns how many buckets there are.
// The keys are non-decreasing, so a bucket's rows are adjacent, and a bucket's
// mean key stays inside the bucket, so that buckets regroup again when the
// width doubles.
size_t regroup(const std::vector<std::vector<double>*>& columns, const std::vector<double>& key,
               std::vector<int64_t>& weights, size_t folded, size_t end, double width) {
  std::vector<double> sum(columns.size()), weight_of_finite(columns.size());
  std::vector<int64_t> grouped;
  size_t out = 0;
  for (size_t i = 0; i < end;) {
    const double bucket = std::floor(key[i] / width);
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(weight_of_finite.begin(), weight_of_finite.end(), 0.0);
    int64_t weight = 0;
    size_t j = i;
    for (; j < end && std::floor(key[j] / width) == bucket; ++j) {
      const int64_t w = j < folded ? weights[j] : 1;
      weight += w;
      for (size_t c = 0; c < columns.size(); ++c) {
        const double v = (*columns[c])[j];
        if (!std::isfinite(v)) continue;
        sum[c] += v * double(w);
        weight_of_finite[c] += double(w);
      }
    }
    // Row `out` is at or before row `i`: nothing not yet read is overwritten.
    for (size_t c = 0; c < columns.size(); ++c)
      (*columns[c])[out] = weight_of_finite[c] > 0 ? sum[c] / weight_of_finite[c] : kMissing;
    grouped.push_back(weight);
    ++out;
    i = j;
  }
  for (auto* column : columns)
    column->erase(column->begin() + std::ptrdiff_t(out), column->begin() + std::ptrdiff_t(end));
  weights = std::move(grouped);
  return out;
}

std::vector<std::vector<double>*> columns_of(RankColumns& rank) {
  std::vector<std::vector<double>*> columns{&rank.step, &rank.time};
  for (auto& [name, column] : rank.fields) columns.push_back(&column);
  return columns;
}

std::vector<std::vector<double>*> columns_of(SystemColumns& s) {
  std::vector<std::vector<double>*> columns{&s.time, &s.cpu_util, &s.nic_rx_mb_s, &s.nic_tx_mb_s};
  for (auto& [rank, column] : s.rank_rss) columns.push_back(&column);
  for (auto& [index, gpu] : s.gpus) {
    columns.push_back(&gpu.util);
    columns.push_back(&gpu.mem_used);
  }
  return columns;
}

// Folds every rank's steps before the newest - recent_steps once the rows
// one at a step span a quarter more than that (so that folding, which
// rewrites the rank's columns, comes once in recent_steps / 4 steps), and
// widens the buckets while a rank holds more than coarse_rows of them. One
// boundary and one width for every rank: the job's line adds the ranks'
// rows of the same steps.
// `newest` is the step just added: a step that triggers a fold is the
// highest seen (a higher one would have triggered it before).
void fold_steps(RunData& data, const RowLimits& limits, double newest) {
  const double recent = double(std::max<int64_t>(limits.recent_steps, 1));
  if (!(newest - data.folded_before_step > recent * 1.25)) return;
  if (data.step_bucket == 0) data.step_bucket = std::max<int64_t>(limits.first_bucket_steps, 1);
  double width = double(data.step_bucket);
  // Not rounded to a bucket: the last bucket may be folded in part (its
  // later steps join it at the next fold), so that the rows one a step stay
  // recent_steps x 5/4 at most however wide the buckets have become.
  const double boundary = newest - recent;
  size_t most = 0;
  for (auto& [r, rank] : data.ranks) {
    const size_t end =
        size_t(std::lower_bound(rank.step.begin(), rank.step.end(), boundary) - rank.step.begin());
    rank.folded_rows = regroup(columns_of(rank), rank.step, rank.folded_steps, rank.folded_rows,
                               std::max(end, rank.folded_rows), width);
    most = std::max(most, rank.folded_rows);
  }
  data.folded_before_step = boundary;
  while (most > std::max<size_t>(limits.coarse_rows, 1)) {
    data.step_bucket *= 2;
    width = double(data.step_bucket);
    most = 0;
    for (auto& [r, rank] : data.ranks) {
      rank.folded_rows = regroup(columns_of(rank), rank.step, rank.folded_steps, rank.folded_rows,
                                 rank.folded_rows, width);
      most = std::max(most, rank.folded_rows);
    }
  }
}

// The same for one node's system samples, by the node's clock.
void fold_system(SystemColumns& s, const RowLimits& limits) {
  if (s.rows() == 0) return;
  const double newest = s.time.back();
  const double recent = std::max(limits.recent_system_seconds, 1.0);
  if (!std::isfinite(s.folded_before)) s.folded_before = s.time.front();
  if (!(newest - s.folded_before > recent * 1.25)) return;
  if (s.bucket_seconds == 0) s.bucket_seconds = std::max(limits.first_bucket_seconds, 1.0);
  const double boundary = newest - recent;
  const size_t end =
      size_t(std::lower_bound(s.time.begin(), s.time.end(), boundary) - s.time.begin());
  s.folded_rows = regroup(columns_of(s), s.time, s.folded_samples, s.folded_rows,
                          std::max(end, s.folded_rows), s.bucket_seconds);
  s.folded_before = boundary;
  while (s.folded_rows > std::max<size_t>(limits.coarse_rows, 1)) {
    s.bucket_seconds *= 2;
    s.folded_rows = regroup(columns_of(s), s.time, s.folded_samples, s.folded_rows, s.folded_rows,
                            s.bucket_seconds);
  }
}

}  // namespace

bool RunData::systems_folded() const {
  for (const auto& [node, s] : systems)
    if (s.folded_rows > 0) return true;
  return false;
}

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
  for (const auto& [rank, columns] : ranks) n += columns.records;
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
    if (record.type == "step") {
      add_step(data, record, j);
      if (const auto rank = data.ranks.find(record.rank);
          data.limits && rank != data.ranks.end() && rank->second.rows() > 0)
        fold_steps(data, *data.limits, rank->second.step.back());
    } else if (record.type == "system") {
      add_system(data, record, j);
      if (data.limits)
        if (const auto s = data.systems.find(record.node); s != data.systems.end())
          fold_system(s->second, *data.limits);
    } else if (record.type == "start")
      add_start(data, record, j);
    else if (record.type == "epoch")
      add_epoch(data, record, j);
    else if (record.type == "transition")
      add_transition(data, record, j);
  }
}

}  // namespace flotilla::charts
