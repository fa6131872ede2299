#include "flotilla/charts/run_loader.h"

#include <algorithm>

namespace flotilla::charts {
namespace {

RunData header(const controller::Store& store, const std::string& run_id) {
  RunData data;
  auto run = store.run(run_id);
  if (!run) throw RunNotFound("no run \"" + run_id + "\" in " + store.path().toStdString());
  data.run = std::move(*run);
  data.shape = job_shape_of(data.run);
  data.transitions = store.transitions(run_id);
  for (const auto& name : data.run.nodes) {
    if (const auto node = store.node(name))
      data.nodes.push_back(node_info_of(*node));
    else
      data.nodes.push_back({name, "", {}, kMissing});
  }
  return data;
}

}  // namespace

RunData load_run(const controller::Store& store, const std::string& run_id,
                 const std::optional<RowLimits>& limits, const CancelCheck& cancelled) {
  RunData data = header(store, run_id);
  data.limits = limits;
  // A page at a time: a day's run holds millions of records, whose texts
  // would otherwise all be in memory at once before they are folded.
  std::string node;
  int64_t seq = 0;
  for (;;) {
    if (cancelled && cancelled())
      throw LoadCancelled("the load of run " + run_id + " was given up");
    const auto page = store.records_page(run_id, node, seq, kRecordsPerRead);
    add_records(data, page);
    if (page.size() < size_t(kRecordsPerRead)) break;
    node = page.back().node;
    seq = page.back().seq;
  }
  return data;
}

RunData load_run_coarse(const controller::Store& store, const std::string& run_id) {
  RunData data = header(store, run_id);
  std::vector<controller::RecordRow> others;
  for (const char* type : {"start", "epoch", "system"}) {
    auto some = store.records(run_id, controller::RecordFilter{type, {}, {}});
    std::move(some.begin(), some.end(), std::back_inserter(others));
  }
  std::sort(others.begin(), others.end(), [](const auto& a, const auto& b) {
    return std::tie(a.node, a.seq) < std::tie(b.node, b.seq);
  });
  add_records(data, others);
  data.coarse = true;
  data.bucket_steps = controller::kStepsPerBucket;
  for (const auto& bucket : store.step_buckets(run_id)) {
    const auto step = bucket.fields.find("step");
    if (step == bucket.fields.end()) continue;
    auto& rank = data.ranks[bucket.rank];
    rank.rank = bucket.rank;
    rank.records += bucket.records;
    const size_t row = rank.rows();
    rank.step.push_back(step->second.sum / double(step->second.count));
    const auto time = bucket.fields.find("time");
    rank.time.push_back(
        time == bucket.fields.end() ? kMissing : time->second.sum / double(time->second.count));
    for (const auto& [name, summary] : bucket.fields) {
      if (name == "step" || name == "time") continue;
      for (auto* columns : {&rank.fields, &rank.low, &rank.high}) {
        auto& column = (*columns)[name];
        column.resize(row, kMissing);
      }
      rank.fields[name].push_back(summary.sum / double(summary.count));
      rank.low[name].push_back(summary.min);
      rank.high[name].push_back(summary.max);
      if (name == "stage" && !rank.stage) rank.stage = int64_t(summary.min);
      if (name == "replica") rank.replica = int64_t(summary.min);
    }
    for (auto* columns : {&rank.fields, &rank.low, &rank.high})
      for (auto& [name, column] : *columns) column.resize(row + 1, kMissing);
  }
  // The node of each rank, from its start record.
  for (auto& [r, rank] : data.ranks)
    if (const auto start = data.starts.find(r); start != data.starts.end())
      rank.node = start->second.node;
  return data;
}

bool has_more_steps_than(const controller::Store& store, const std::string& run_id, int64_t limit) {
  int64_t steps = 0;
  for (const auto& bucket : store.step_buckets(run_id)) {
    steps += bucket.records;
    if (steps > limit) return true;
  }
  return false;
}

size_t load_new_records(const controller::Store& store, RunData& data) {
  if (auto run = store.run(data.run.id)) {
    data.run = std::move(*run);
    data.transitions = store.transitions(data.run.id);
  }
  size_t added = 0;
  for (const auto& node : data.run.nodes) {
    const auto last = data.last_seq.find(node);
    const auto records = store.records(data.run.id, controller::RecordFilter{{}, {}, node},
                                       last == data.last_seq.end() ? 0 : last->second);
    add_records(data, records);
    added += records.size();
  }
  return added;
}

}  // namespace flotilla::charts
