// The compare table's rows: each run's records read by kind from the store,
// its statistics, and the columns derived against the baseline.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "flotilla/controller/compare.h"
#include "flotilla/controller/link_bench.h"
#include "flotilla/controller/run_prediction.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/numbers.h"
#include "flotilla/protocol/record_reading.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;

std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const auto& p : problems) text += (text.empty() ? "" : "; ") + p;
  return text;
}

// What a run's config says, read leniently: a stored config that no longer
// validates still has a strategy and a batch size to show.
struct ConfigFacts {
  std::string model, dataset, strategy, device;
  int64_t batch = 0, ranks_per_node = 1, replicas = 1, chunks = 1;
  bool given_balance = false;  // the config's `balance`, not one found from block costs
  bool valid = false;
};

ConfigFacts facts_of(const RunRow& run) {
  ConfigFacts f;
  const auto j = json::parse(run.config_json, nullptr, false);
  if (!j.is_object()) return f;
  auto text = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto integer = [&](const char* key, int64_t fallback) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
  };
  f.model = text("model");
  f.dataset = text("dataset");
  f.strategy = text("strategy");
  f.device = text("device");
  f.batch = integer("batch_size", 0);
  f.ranks_per_node = integer("ranks_per_node", 1);
  f.replicas = integer("replicas", 1);
  f.chunks = integer("chunks", 1);
  const auto balance = j.find("balance");  // stored as [] when not given
  f.given_balance = balance != j.end() && balance->is_array() && !balance->empty();
  // batch_scope global: batch_size is the whole job's, split among the
  // data-parallel replicas (flotilla/protocol/rank_placement.h); `batch`
  // here is always one replica's.
  if (text("batch_scope") == "global") {
    const int64_t replicas = f.strategy == "ddp"            ? std::max<int64_t>(1, run.world_size)
                             : f.strategy == "pipeline_ddp" ? std::max<int64_t>(1, f.replicas)
                                                            : 1;
    f.batch /= replicas;
  }
  f.valid = true;
  return f;
}

// Samples a step of the whole job takes: one batch per data-parallel replica.
int64_t global_batch(const ConfigFacts& f, int64_t world_size) {
  if (f.strategy == "ddp") return f.batch * world_size;
  if (f.strategy == "pipeline_ddp") return f.batch * std::max<int64_t>(1, f.replicas);
  return f.batch;  // single, dp (one process splits it), pipeline
}

bool is_pipeline(const ConfigFacts& f) {
  return f.strategy == "pipeline" || f.strategy == "pipeline_ddp";
}

// The config without what differs between repeats of one experiment.
std::string repeat_key(const RunRow& run) {
  auto j = json::parse(run.config_json, nullptr, false);
  if (!j.is_object()) return run.config_json;
  j.erase("name");
  j.erase("seed");
  return j.dump();
}

// A node's NIC counters as its agent sampled them: cumulative bytes over
// every interface but the loopback, as vnstat counts them.
struct NicSpan {
  int64_t least_rx = 0, most_rx = 0, least_tx = 0, most_tx = 0;
};

// A node's traffic over its last epoch's training, as the engine read the
// node's counters around it (the lowest rank on the node said it).
struct NicEpoch {
  int64_t rank = 0, epoch = -1, rx = 0, tx = 0;
};

struct LoadedRun {
  metrics::RunRecords records;
  std::map<std::string, NicSpan> nics;         // by node
  std::map<std::string, NicEpoch> nic_epochs;  // by node, where the engine read them
  int64_t steps_per_epoch = 0;
  int64_t trainable_parameters = 0;  // rank 0's: the whole model's but in a pipeline
  std::vector<int64_t> balance;      // a pipeline's blocks per stage, as rank 0 ran them
  int64_t malformed = 0;
};

LoadedRun load(const Store& store, const RunRow& run, bool gpu) {
  LoadedRun out;
  out.records.gpu = gpu;
  auto read = [&](const char* type, std::optional<int64_t> rank, auto parse, auto keep) {
    for (const auto& r : store.records(run.id, RecordFilter{type, rank, std::nullopt})) {
      auto parsed = parse(r.body);
      if (parsed)
        keep(std::move(*parsed));
      else
        ++out.malformed;
    }
  };
  read("step", std::nullopt, records::step_from_line,
       [&](records::Step s) { out.records.steps.push_back(std::move(s)); });
  // Every rank's epochs, read once: rank 0's are the run's; each node's
  // lowest rank's last one carries the node's traffic.
  for (const auto& r : store.records(run.id, RecordFilter{"epoch", std::nullopt, std::nullopt})) {
    const auto e = records::epoch_from_line(r.body);
    if (r.rank == 0) {
      if (e)
        out.records.epochs.push_back(*e);
      else
        ++out.malformed;
    }
    if (!e || e->nic_rx_bytes < 0 || e->nic_tx_bytes < 0) continue;
    const auto [it, first] = out.nic_epochs.try_emplace(r.node);
    auto& kept = it->second;
    if (first || e->epoch > kept.epoch || (e->epoch == kept.epoch && e->rank < kept.rank))
      kept = {e->rank, e->epoch, e->nic_rx_bytes, e->nic_tx_bytes};
  }
  read("end", std::nullopt, records::end_from_line,
       [&](records::End e) { out.records.ends.push_back(std::move(e)); });
  read("start", 0, records::start_from_line, [&](records::Start s) {
    out.steps_per_epoch = s.steps_per_epoch;
    out.trainable_parameters = s.trainable_parameters;
    out.balance = s.balance;
  });
  // The agents' NIC counters on every node, GPU or not: the traffic a node
  // moved while the run lived is the span of its cumulative counters.
  for (const auto& r : store.records(run.id, RecordFilter{"system", -1, std::nullopt})) {
    const auto j = json::parse(r.body, nullptr, false);
    if (!j.is_object() || !j.contains("nic_rx") || !j.contains("nic_tx")) continue;
    if (!j["nic_rx"].is_number_integer() || !j["nic_tx"].is_number_integer()) continue;
    const auto rx = j["nic_rx"].get<int64_t>(), tx = j["nic_tx"].get<int64_t>();
    const auto [it, first] = out.nics.try_emplace(r.node, NicSpan{rx, rx, tx, tx});
    auto& span = it->second;
    span.least_rx = std::min(span.least_rx, rx);
    span.most_rx = std::max(span.most_rx, rx);
    span.least_tx = std::min(span.least_tx, tx);
    span.most_tx = std::max(span.most_tx, tx);
  }
  // CPU memory is the ranks' RSS, which the agents sample once a second.
  if (!gpu)
    read("system", -1, records::rank_rss_from_line, [&](std::map<int64_t, int64_t> rss) {
      for (const auto& [rank, bytes] : rss)
        out.records.peak_rank_rss[rank] = std::max(out.records.peak_rank_rss[rank], bytes);
    });
  return out;
}

std::string first_line(const std::string& text, size_t most = 80) {
  auto line = text.substr(0, text.find('\n'));
  if (line.size() > most) line = line.substr(0, most - 3) + "...";
  return line;
}

void set_number(CompareRow& row, const std::string& key, std::optional<double> value) {
  row.cells[key].number = value;
}
void set_text(CompareRow& row, const std::string& key, std::string value) {
  row.cells[key].text = std::move(value);
}

struct NicEpochBytes {
  double rx = 0, tx = 0;
};

// Each node's bytes in one epoch: the engine's reading of the last epoch
// where it made one; for runs from before it made them, the agents' span
// over the run, shared by its epochs. Empty without epochs or counters.
std::map<std::string, NicEpochBytes> nic_per_epoch(const LoadedRun& loaded) {
  std::map<std::string, NicEpochBytes> out;
  if (!loaded.nic_epochs.empty()) {
    for (const auto& [node, e] : loaded.nic_epochs)
      out[node] = {static_cast<double>(e.rx), static_cast<double>(e.tx)};
    return out;
  }
  const auto epochs = static_cast<double>(loaded.records.epochs.size());
  if (epochs == 0) return out;
  for (const auto& [node, span] : loaded.nics)
    out[node] = {static_cast<double>(span.most_rx - span.least_rx) / epochs,
                 static_cast<double>(span.most_tx - span.least_tx) / epochs};
  return out;
}

// "flh1 612.3/611.9, flh2 ...": each node's rx/tx MB an epoch, as seed 003
// tabulated vnstat's rx/tx per server per epoch; empty without them.
std::string nic_text(const std::map<std::string, NicEpochBytes>& nodes) {
  const auto mb = [](double bytes) { return format_fixed(bytes / 1e6, 1); };
  std::string text;
  for (const auto& [node, bytes] : nodes)
    text += (text.empty() ? "" : ", ") + node + " " + mb(bytes.rx) + "/" + mb(bytes.tx);
  return text;
}

// The mean over the nodes of one direction's MB, as seed 003's per-server
// table averages.
std::optional<double> nic_mean_mb(const std::map<std::string, NicEpochBytes>& nodes, bool rx) {
  if (nodes.empty()) return std::nullopt;
  double sum = 0;
  for (const auto& [node, bytes] : nodes) sum += rx ? bytes.rx : bytes.tx;
  return sum / 1e6 / static_cast<double>(nodes.size());
}

std::optional<double> percent(std::optional<double> fraction) {
  if (!fraction) return std::nullopt;
  return 100.0 * *fraction;
}

// What a rank puts on the wire per step for `payload` handed to
// communication: a ring all-reduce sends 2(P-1)/P of its payload (nothing on
// one rank); a pipeline's sends are point to point, payload as it is. A
// pipeline_ddp rank does both and its records do not tell them apart: none.
std::optional<double> wire_bytes(const ConfigFacts& f, int64_t world_size, double payload) {
  if (f.strategy == "ddp") return metrics::ring_allreduce_bytes(payload, world_size);
  if (f.strategy == "pipeline") return payload;
  if (f.strategy == "single" || f.strategy == "dp") return 0.0;
  return std::nullopt;
}

// Seed 004's bandwidth column as the seed computed it: 2 N (P - 1) / P with N
// the model's parameter count (not bytes), times its iterations per epoch
// ceil(epoch samples / batch) with the job's batch (the seed's was
// DataParallel's, global: a replica's batch would count N times the steps),
// over the communication time, / 1e9. Its unit is parameters, not bytes.
std::optional<double> seed_ring_bandwidth(int64_t parameters, int64_t ranks,
                                          std::optional<double> epoch_samples, int64_t batch,
                                          double comm_s) {
  if (parameters <= 0 || ranks <= 1 || !epoch_samples || batch <= 0 || !(comm_s > 0))
    return std::nullopt;
  const double iterations = std::ceil(*epoch_samples / static_cast<double>(batch));
  return metrics::ring_allreduce_bytes(static_cast<double>(parameters), ranks) * iterations /
         comm_s / 1e9;
}

// What a row shows of itself, before anything relative to the baseline.
void fill_own_cells(CompareRow& row, const ConfigFacts& facts, const LoadedRun& loaded,
                    bool link_bench, int64_t now) {
  const auto& run = row.run;
  const auto& s = row.stats;
  const bool oom = run.state == RunState::oom;
  set_text(row, "run", run.id);
  set_text(row, "experiment", run.experiment_name);
  std::string outcome = row.live ? "running" : std::string(name_of(run.state));
  if (oom) {
    const int64_t batch = s.oom_batch_size.value_or(facts.batch);
    outcome += " (batch " + std::to_string(batch) + ")";
    row.notes.push_back("oom at batch " + std::to_string(batch));
  }
  set_text(row, "outcome", outcome);
  set_text(row, "model", facts.model);
  set_text(row, "dataset", facts.dataset);
  set_text(row, "strategy", facts.strategy);
  set_number(row, "nodes", static_cast<double>(run.nodes.size()));
  set_number(row, "ranks", static_cast<double>(run.world_size));
  if (facts.valid) {
    set_number(row, "batch", static_cast<double>(facts.batch));
    set_number(row, "global_batch", static_cast<double>(global_batch(facts, run.world_size)));
    if (is_pipeline(facts)) set_number(row, "chunks", static_cast<double>(facts.chunks));
  }
  if (row.live) row.notes.push_back("live: numbers as of now");
  if (link_bench)
    row.notes.push_back("a link bench (nodes bench), not training");
  else if (s.steps == 0 && !oom)
    row.notes.push_back("no steps");
  if (run.state == RunState::failed)
    row.notes.push_back("failed" + (run.reason.empty() ? "" : ": " + first_line(run.reason)));
  if (run.state == RunState::killed) row.notes.push_back("killed");
  if (loaded.malformed > 0)
    row.notes.push_back(std::to_string(loaded.malformed) + " malformed records skipped");
  // As the seeds' tables keep OOM rows: the batch that failed, no numbers.
  if (oom) return;
  set_number(row, "steps", static_cast<double>(s.steps));
  set_number(row, "throughput", s.throughput);
  set_number(row, "step_ms", s.step_ms);
  if (s.step_shares) {
    set_number(row, "data_pct", 100 * s.step_shares->data);
    set_number(row, "forward_pct", 100 * s.step_shares->forward);
    set_number(row, "backward_pct", 100 * s.step_shares->backward);
    set_number(row, "comm_pct", 100 * s.step_shares->comm);
    set_number(row, "optimizer_pct", 100 * s.step_shares->optimizer);
  }
  if (s.bytes_per_step) {
    set_number(row, "sent_mb", *s.bytes_per_step / 1e6);
    if (const auto wire = wire_bytes(facts, run.world_size, *s.bytes_per_step))
      set_number(row, "wire_mb", *wire / 1e6);
  }
  set_number(row, "busbw_gbps", s.busbw_gbps);
  set_number(row, "comm_hidden_pct", percent(s.comm_hidden));
  set_number(row, "recv_ms", s.recv_ms);
  set_number(row, "recv_gbps", s.recv_gbps);
  if (s.peak_memory)
    set_number(row, "peak_mem_mib", static_cast<double>(*s.peak_memory) / 1048576.0);
  const auto nic = nic_per_epoch(loaded);
  set_text(row, "nic_mb_epoch", nic_text(nic));
  set_number(row, "nic_rx_mb_epoch", nic_mean_mb(nic, true));
  set_number(row, "nic_tx_mb_epoch", nic_mean_mb(nic, false));
  set_number(row, "epoch_s", s.epoch_s);
  set_number(row, "steady_epoch_s", s.steady_epoch_s);
  std::optional<double> run_s = s.run_s;
  if (row.live && run.running_ms) run_s = static_cast<double>(now - *run.running_ms) / 1000.0;
  set_number(row, "run_s", run_s);
  set_number(row, "acc_test_pct", percent(s.acc_test));
  if (is_pipeline(facts)) {
    if (!loaded.balance.empty()) {
      // The cut the run used, which a report must name: a seed's own
      // (`balance:` given) or the one the engine found from block costs.
      std::string cut;
      for (const auto blocks : loaded.balance)
        cut += (cut.empty() ? "" : "+") + std::to_string(blocks);
      set_text(row, "balance", cut + (facts.given_balance ? " (given)" : " (by cost)"));
    }
    set_number(row, "pipeline_eff_pct", percent(s.pipeline_efficiency));
    const int64_t stages = s.pipeline_stages > 0
                               ? s.pipeline_stages
                               : run.world_size / std::max<int64_t>(1, facts.replicas);
    set_number(row, "pipeline_bound_pct", percent(metrics::gpipe_bound(facts.chunks, stages)));
  }
}

}  // namespace

CompareError::CompareError(std::vector<std::string> problems)
    : std::runtime_error(joined(problems)), problems_(std::move(problems)) {}

std::vector<std::string> runs_of_experiment(const Store& store, const std::string& experiment) {
  std::vector<std::string> ids;
  for (const auto& run : store.runs())
    if (run.experiment_name == experiment) ids.push_back(run.id);
  if (ids.empty())
    throw CompareError(
        {"experiment \"" + experiment + "\" has no runs in " + store.path().toStdString()});
  return ids;
}

CompareTable compare_runs(const Store& store, const std::vector<std::string>& runs,
                          const CompareOptions& options) {
  std::vector<std::string> problems;
  if (runs.empty()) problems.push_back("no runs to compare: name one or more runs");
  CompareTable table;
  table.columns = options.columns.empty() ? default_compare_columns() : options.columns;
  for (const auto& key : table.columns)
    if (!find_compare_column(key)) {
      std::string known;
      for (const auto& c : compare_columns()) known += (known.empty() ? "" : ", ") + c.key;
      problems.push_back("unknown column \"" + key + "\" (known: " + known + ")");
    }
  std::vector<RunRow> rows;
  for (const auto& id : runs) {
    if (auto row = store.run(id))
      rows.push_back(std::move(*row));
    else
      problems.push_back("no run \"" + id + "\" in " + store.path().toStdString());
  }
  if (options.baseline) {
    const auto it = std::find(runs.begin(), runs.end(), *options.baseline);
    if (it == runs.end())
      problems.push_back("baseline \"" + *options.baseline + "\" is not among the compared runs (" +
                         join_list(runs) + ")");
    else
      table.baseline = static_cast<size_t>(it - runs.begin());
  }
  if (!problems.empty()) throw CompareError(problems);

  table.as_of_ms = now_ms();
  std::set<std::string> benches;
  for (const auto& b : link_benches(store)) benches.insert(b.run_id);
  std::vector<ConfigFacts> facts;
  std::vector<int64_t> steps_per_epoch, parameters;
  for (auto& run : rows) {
    CompareRow row;
    const auto f = facts_of(run);
    const auto loaded = load(store, run, f.device == "cuda");
    row.stats = metrics::run_statistics(loaded.records);
    row.live = !is_terminal(run.state);
    row.run = std::move(run);
    fill_own_cells(row, f, loaded, benches.count(row.run.id) > 0, table.as_of_ms);
    facts.push_back(f);
    steps_per_epoch.push_back(loaded.steps_per_epoch);
    parameters.push_back(loaded.trainable_parameters);
    table.rows.push_back(std::move(row));
  }

  // Relative to the baseline. An OOM row has no throughput, so no ratios.
  auto& base = table.rows[table.baseline];
  base.baseline = true;
  base.notes.insert(base.notes.begin(), "baseline");
  const bool base_oom = base.run.state == RunState::oom;
  const auto base_throughput = base_oom ? std::nullopt : base.stats.throughput;
  const auto base_epoch = base_oom ? std::nullopt : base.stats.steady_epoch_s;
  if (!base_throughput)
    table.warnings.push_back("baseline " + base.run.id +
                             " has no throughput (no steps after warm-up or oom): no speed-up "
                             "or scaling efficiency");
  std::map<std::string, std::optional<LinkBench>> benches_by_nodes;
  std::set<std::string> unmeasured_links;
  for (size_t i = 0; i < table.rows.size(); ++i) {
    auto& row = table.rows[i];
    if (row.run.state == RunState::oom) continue;
    const int64_t ranks = row.run.world_size, base_ranks = base.run.world_size;
    const auto up = metrics::speedup(row.stats.throughput, base_throughput);
    set_number(row, "speedup", up);
    set_number(row, "scaling_eff", metrics::scaling_efficiency(up, ranks, base_ranks));
    const auto split = metrics::time_split(row.stats.steady_epoch_s, ranks, base_epoch, base_ranks);
    if (split) {
      set_number(row, "compute_s", split->compute_s);
      set_number(row, "comm_s", split->comm_s);
      if (facts[i].strategy == "ddp") {
        set_number(row, "ring_gbps",
                   metrics::ring_bandwidth_gbps(row.stats.bytes_per_step, ranks, steps_per_epoch[i],
                                                split->comm_s));
        set_number(row, "seed_ring_gbps",
                   seed_ring_bandwidth(parameters[i], ranks, row.stats.epoch_samples,
                                       global_batch(facts[i], ranks), split->comm_s));
      }
    }
    if (row.stats.busbw_gbps && row.stats.message_bytes) {
      const auto key = node_set_key(row.run.nodes);
      auto found = benches_by_nodes.find(key);
      if (found == benches_by_nodes.end())
        found = benches_by_nodes.emplace(key, latest_link_bench(store, row.run.nodes, ranks)).first;
      if (found->second) {
        std::vector<metrics::LinkPoint> sweep;
        for (const auto& p : found->second->points)
          sweep.push_back({static_cast<double>(p.bytes), p.busbw_gbps});
        const auto link = metrics::link_busbw_at(sweep, *row.stats.message_bytes);
        set_number(row, "link_busbw_gbps", link);
        set_number(row, "link_util_pct",
                   percent(metrics::link_utilisation(row.stats.busbw_gbps, link)));
      } else {
        unmeasured_links.insert(key);
      }
    }
  }
  // Predicted before the run, where `flotilla run --predict` kept a prediction.
  for (auto& row : table.rows) {
    const auto predicted = run_prediction(store, row.run.id);
    if (predicted && predicted->peak_memory_bytes > 0) {
      const double mib = static_cast<double>(predicted->peak_memory_bytes) / 1048576.0;
      set_number(row, "predicted_peak_mem_mib", mib);
      if (row.stats.peak_memory && *row.stats.peak_memory > 0)
        set_number(row, "peak_mem_err_pct",
                   100 *
                       (static_cast<double>(predicted->peak_memory_bytes) -
                        static_cast<double>(*row.stats.peak_memory)) /
                       static_cast<double>(*row.stats.peak_memory));
    }
    if (!predicted || !(predicted->samples_per_s > 0)) continue;
    set_number(row, "predicted_throughput", predicted->samples_per_s);
    if (row.stats.throughput && *row.stats.throughput > 0)
      set_number(row, "prediction_err_pct",
                 100 * (predicted->samples_per_s - *row.stats.throughput) / *row.stats.throughput);
  }
  const bool shows_link =
      std::find_if(table.columns.begin(), table.columns.end(), [](const std::string& c) {
        return c == "link_util_pct" || c == "link_busbw_gbps";
      }) != table.columns.end();
  if (shows_link)
    for (const auto& nodes : unmeasured_links)
      table.warnings.push_back("no link sweep of nodes " + nodes + " yet: `flotilla nodes bench " +
                               nodes + "` measures it for the link utilisation column");

  // Accuracy over repeats: the compared runs of one config, seeds aside.
  std::map<std::string, std::vector<size_t>> repeats;
  for (size_t i = 0; i < table.rows.size(); ++i)
    if (table.rows[i].stats.acc_test && !table.rows[i].live &&
        table.rows[i].run.state == RunState::finished)
      repeats[repeat_key(table.rows[i].run)].push_back(i);
  for (const auto& [key, members] : repeats) {
    if (members.size() < 2) continue;
    std::vector<double> accuracies;
    for (size_t i : members) accuracies.push_back(100 * *table.rows[i].stats.acc_test);
    const auto m = metrics::mean_and_spread(accuracies);
    for (size_t i : members)
      set_text(table.rows[i], "acc_test_repeats",
               format_fixed(m->mean, 2) + "±" + format_fixed(m->spread, 2) + " (" +
                   std::to_string(m->count) + " runs)");
  }

  std::vector<std::string> configs;
  for (const auto& row : table.rows) configs.push_back(row.run.config_json);
  table.config_diff = config_diff(configs);
  for (auto& row : table.rows) {
    std::string notes;
    for (const auto& n : row.notes) notes += (notes.empty() ? "" : "; ") + n;
    set_text(row, "notes", notes);
  }
  return table;
}

}  // namespace flotilla::controller
