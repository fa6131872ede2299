// The compare table on a scratch database: every derived column against a
// value computed by hand beside it, marked rows (OOM, live, no steps, failed),
// bad input, the config diff and the formats.
#include <gtest/gtest.h>

#include <clocale>
#include <nlohmann/json.hpp>

#include "flotilla/controller/compare.h"
#include "flotilla/controller/link_bench.h"
#include "flotilla/controller/run_prediction.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/metric_records.h"
#include "flotilla/protocol/numbers.h"
#include "step_records.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;
using testing::TempDir;

// A database holding runs made up record by record.
class ScratchDb {
 public:
  ScratchDb() : store(QString::fromStdString((dir.path() / "flotilla.db").string())) {}

  // A stored run of `config` that has moved through `states`.
  std::string add_run(const std::string& id, const ExperimentConfig& config,
                      std::vector<RunState> states = {RunState::starting, RunState::running,
                                                      RunState::finished},
                      const std::string& reason = {}) {
    RunRow row;
    row.id = id;
    row.experiment_name = config.name;
    row.config_json = to_json(config);
    row.nodes = config.nodes;
    row.world_size = config.world_size();
    row.created_ms = now_ms();
    store.create_run(row);
    for (auto s : states) store.transition(id, s, is_terminal(s) ? reason : "");
    return id;
  }
  void add(const std::string& run, int64_t rank, const std::string& type, const std::string& body,
           const std::string& node = "local") {
    store.append_record(run, {++seq_[run], node, rank, type, body});
  }
  // `steps` steps of `rank` of 64 samples, 20 ms each
  // (testing::twenty_ms_step): samples/s 100 + offset + step in the five
  // warm-up steps, then 108 + offset, the run's throughput. Steps 1..5 are
  // epoch 0, the rest epoch 1.
  void add_steps(const std::string& run, int64_t rank, int64_t steps, double offset,
                 bool loss = true, double busbw = 0, int64_t bytes = 0) {
    for (int64_t i = 1; i <= steps; ++i) {
      auto s = testing::twenty_ms_step(rank, i);
      s.loss = loss ? std::optional<double>(1.0) : std::nullopt;
      s.epoch = i <= 5 ? 0 : 1;
      s.samples = 64;
      s.samples_per_s = 100.0 + offset + static_cast<double>(i <= 5 ? i : 8);
      s.busbw_gbps = busbw;
      s.bytes_sent = bytes;
      s.comm_per_s = bytes > 0 ? 1 / 0.020 : 0;  // one all-reduce a step
      add(run, rank, "step", records::to_line(s));
    }
  }
  void add_epoch(const std::string& run, int64_t epoch, double epoch_s, double acc_test) {
    records::Epoch e;
    e.epoch = epoch;
    e.epoch_s = epoch_s;
    e.acc_test = acc_test;
    add(run, 0, "epoch", records::to_line(e));
  }
  void add_end(const std::string& run, records::Outcome outcome, int64_t batch, double elapsed_s) {
    records::End e;
    e.outcome = outcome;
    e.batch_size = batch;
    e.elapsed_s = elapsed_s;
    add(run, 0, "end", records::to_line(e));
  }

  TempDir dir;
  Store store;

 private:
  std::map<std::string, int64_t> seq_;
};

ExperimentConfig ddp(int64_t ranks, int64_t batch = 32) {
  ExperimentConfig c;
  c.name = "ddp" + std::to_string(ranks);
  c.strategy = Strategy::ddp;
  c.ranks_per_node = ranks;
  c.batch_size = batch;
  return c;
}

const CompareRow& row_of(const CompareTable& t, const std::string& run) {
  for (const auto& r : t.rows)
    if (r.run.id == run) return r;
  throw std::runtime_error("no row " + run);
}

std::optional<double> number(const CompareTable& t, const std::string& run,
                             const std::string& key) {
  const auto& cells = row_of(t, run).cells;
  const auto it = cells.find(key);
  return it == cells.end() ? std::nullopt : it->second.number;
}

std::string text(const CompareTable& t, const std::string& run, const std::string& key) {
  return cell_text(t, row_of(t, run), key);
}

bool has_note(const CompareTable& t, const std::string& run, const std::string& start) {
  for (const auto& n : row_of(t, run).notes)
    if (n.rfind(start, 0) == 0) return true;
  return false;
}

// Runs of 10 steps of 64 samples: warm-up leaves out 5, and the other 5 (epoch
// 1, 320 samples) run at 108 and 158 samples/s.
class TwoDdpRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    db.add_run("one", ddp(1));
    db.add_steps("one", 0, 10, 0);
    db.add_epoch("one", 0, 40.0, 0.80);
    db.add_epoch("one", 1, 38.0, 0.85);
    db.add_end("one", records::Outcome::finished, 32, 80.0);
    db.add_run("two", ddp(2));
    db.add_steps("two", 0, 10, 50, true, 0.5, 4'000'000);
    db.add_steps("two", 1, 10, 0, true, 0.5, 4'000'000);
    db.add_epoch("two", 0, 70.0, 0.79);
    db.add_epoch("two", 1, 67.0, 0.84);
    db.add_end("two", records::Outcome::finished, 32, 140.0);
    db.store.flush();
  }
  ScratchDb db;
};

TEST_F(TwoDdpRuns, SpeedupAndEfficiencyAreRatiosOfTheSteadyThroughputs) {
  const auto t = compare_runs(db.store, {"one", "two"});
  EXPECT_EQ(t.baseline, 0u);
  EXPECT_TRUE(row_of(t, "one").baseline);
  EXPECT_DOUBLE_EQ(*number(t, "one", "throughput"), 108.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "throughput"), 158.0);
  EXPECT_DOUBLE_EQ(*number(t, "one", "speedup"), 1.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "speedup"), 158.0 / 108.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "scaling_eff"), 158.0 / 108.0 / 2.0);
  // Batch per replica and the job's.
  EXPECT_DOUBLE_EQ(*number(t, "two", "batch"), 32.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "global_batch"), 64.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "ranks"), 2.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "nodes"), 1.0);
  EXPECT_EQ(text(t, "two", "chunks"), "—");  // not a pipeline
  // The same job written with batch_scope global: batch_size 64 is the job's.
  auto global = ddp(2, 64);
  global.batch_scope = BatchScope::global;
  db.add_run("global", global);
  db.add_steps("global", 0, 10, 0);
  db.store.flush();
  const auto g = compare_runs(db.store, {"global"});
  EXPECT_DOUBLE_EQ(*number(g, "global", "batch"), 32.0);
  EXPECT_DOUBLE_EQ(*number(g, "global", "global_batch"), 64.0);
  // 2, 6, 8, 3, 1 of every 20 ms.
  EXPECT_DOUBLE_EQ(*number(t, "two", "step_ms"), 20.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "data_pct"), 10.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "forward_pct"), 30.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "backward_pct"), 40.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "comm_pct"), 15.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "optimizer_pct"), 5.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "comm_hidden_pct"), 75.0);  // 1 - 3/12
  EXPECT_DOUBLE_EQ(*number(t, "two", "sent_mb"), 4.0);
  // A ring all-reduce of 4 MB over 2 ranks puts 2 x 4 x 1/2 MB on the wire;
  // one rank puts nothing there.
  EXPECT_DOUBLE_EQ(*number(t, "two", "wire_mb"), 4.0);
  EXPECT_DOUBLE_EQ(*number(t, "one", "wire_mb"), 0.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "busbw_gbps"), 0.5);
  EXPECT_FALSE(number(t, "one", "busbw_gbps"));
  // The first epoch is warm-up when there are more: 38 and 67 s.
  EXPECT_DOUBLE_EQ(*number(t, "two", "epoch_s"), 67.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "run_s"), 140.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "acc_test_pct"), 84.0);
  // The epoch at the steady rate: 320 samples at 108 and at 158 samples/s,
  // so that T(1)/T(2) is the speed-up.
  EXPECT_DOUBLE_EQ(*number(t, "one", "steady_epoch_s"), 320.0 / 108.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "steady_epoch_s"), 320.0 / 158.0);
  EXPECT_DOUBLE_EQ(*number(t, "one", "steady_epoch_s") / *number(t, "two", "steady_epoch_s"),
                   *number(t, "two", "speedup"));
  // Seed 004's split of the steady epochs: compute T(1) x 1 / 2, communication
  // the rest; and 2 x 4e6 x (2-1)/2 bytes a step x 0 steps an epoch: no start
  // record, no rate.
  EXPECT_DOUBLE_EQ(*number(t, "two", "compute_s"), 160.0 / 108.0);
  EXPECT_DOUBLE_EQ(*number(t, "two", "comm_s"), 320.0 / 158.0 - 160.0 / 108.0);
  EXPECT_FALSE(number(t, "two", "ring_gbps"));
  EXPECT_FALSE(number(t, "two", "seed_ring_gbps"));
}

TEST_F(TwoDdpRuns, ABaselineWithMoreRanksGivesEfficiencyAboveTheRatio) {
  CompareOptions options;
  options.baseline = "two";
  const auto t = compare_runs(db.store, {"one", "two"}, options);
  EXPECT_EQ(t.baseline, 1u);
  EXPECT_DOUBLE_EQ(*number(t, "one", "speedup"), 108.0 / 158.0);
  EXPECT_DOUBLE_EQ(*number(t, "one", "scaling_eff"), 108.0 / 158.0 / 0.5);
  EXPECT_TRUE(has_note(t, "two", "baseline"));
}

TEST_F(TwoDdpRuns, RingBandwidthUsesTheStepsOfAnEpoch) {
  records::Start start;
  start.steps_per_epoch = 1563;
  start.trainable_parameters = 1'000'000;
  db.add("two", 0, "start", records::to_line(start));
  db.store.flush();
  const auto t = compare_runs(db.store, {"one", "two"});
  const double comm_s = 320.0 / 158.0 - 160.0 / 108.0;
  // Bytes: 2 x 4e6 x 1/2 on the wire a step x 1563 steps over the comm time.
  EXPECT_DOUBLE_EQ(*number(t, "two", "ring_gbps"), 4e6 * 1563 / comm_s / 1e9);
  // Seed 004's way: 2 x 1e6 parameters x 1/2 x ceil(320 samples / the job's
  // batch, 2 ranks x 32) iterations over the same time: the steps it took.
  EXPECT_DOUBLE_EQ(*number(t, "two", "seed_ring_gbps"), 1e6 * 5 / comm_s / 1e9);
}

TEST_F(TwoDdpRuns, OomRowKeepsTheBatchThatFailedAndNoNumbers) {
  db.add_run("big", ddp(1, 512), {RunState::starting, RunState::running, RunState::oom},
             "out of memory");
  db.add_end("big", records::Outcome::oom, 512, 3.0);
  db.store.flush();
  const auto t = compare_runs(db.store, {"one", "big"});
  EXPECT_EQ(text(t, "big", "outcome"), "oom (batch 512)");
  EXPECT_TRUE(has_note(t, "big", "oom at batch 512"));
  EXPECT_DOUBLE_EQ(*number(t, "big", "batch"), 512.0);
  for (const char* key : {"throughput", "speedup", "scaling_eff", "step_ms", "run_s"})
    EXPECT_FALSE(number(t, "big", key)) << key;
  EXPECT_EQ(text(t, "big", "speedup"), "—");
}

TEST_F(TwoDdpRuns, LiveRunIsComparedAsOfNowAndMarked) {
  db.add_run("live", ddp(2), {RunState::starting, RunState::running});
  db.add_steps("live", 0, 10, 20);
  db.store.flush();
  const auto t = compare_runs(db.store, {"one", "live"});
  EXPECT_TRUE(row_of(t, "live").live);
  EXPECT_EQ(text(t, "live", "outcome"), "running");
  EXPECT_TRUE(has_note(t, "live", "live"));
  EXPECT_DOUBLE_EQ(*number(t, "live", "speedup"), 128.0 / 108.0);
  EXPECT_GE(*number(t, "live", "run_s"), 0.0);  // since it started running, so far
}

TEST_F(TwoDdpRuns, RunWithoutStepsIsKeptWithoutDerivedNumbers) {
  db.add_run("empty", ddp(2));
  db.store.flush();
  const auto t = compare_runs(db.store, {"one", "empty"});
  EXPECT_TRUE(has_note(t, "empty", "no steps"));
  EXPECT_FALSE(number(t, "empty", "throughput"));
  EXPECT_FALSE(number(t, "empty", "speedup"));
  EXPECT_FALSE(number(t, "empty", "scaling_eff"));
  EXPECT_TRUE(t.warnings.empty());
}

TEST_F(TwoDdpRuns, BaselineWithoutStepsGivesNoRatiosAndSaysWhy) {
  db.add_run("empty", ddp(1));
  db.store.flush();
  CompareOptions options;
  options.baseline = "empty";
  const auto t = compare_runs(db.store, {"one", "two", "empty"}, options);
  EXPECT_FALSE(number(t, "one", "speedup"));
  EXPECT_FALSE(number(t, "two", "speedup"));
  // Besides the missing link sweep of run two's nodes.
  ASSERT_EQ(t.warnings.size(), 2u);
  EXPECT_NE(t.warnings.front().find("baseline empty has no throughput"), std::string::npos);
  EXPECT_NE(t.warnings.back().find("no link sweep of nodes local"), std::string::npos);
}

TEST_F(TwoDdpRuns, FailedRunKeepsItsNumbersAndItsReason) {
  db.add_run("broke", ddp(2), {RunState::starting, RunState::running, RunState::failed},
             "rank 1: connection reset\nmore detail");
  db.add_steps("broke", 0, 10, 0);
  db.store.flush();
  const auto t = compare_runs(db.store, {"one", "broke"});
  EXPECT_TRUE(has_note(t, "broke", "failed: rank 1: connection reset"));
  EXPECT_DOUBLE_EQ(*number(t, "broke", "throughput"), 108.0);
}

TEST_F(TwoDdpRuns, MalformedRecordsAreSkippedAndCounted) {
  db.add("two", 0, "step", "{\"type\":\"step\",\"step_ms\":\"slow\"}");
  db.add("two", 0, "step", "not json");
  db.store.flush();
  const auto t = compare_runs(db.store, {"one", "two"});
  EXPECT_TRUE(has_note(t, "two", "2 malformed records skipped"));
  EXPECT_DOUBLE_EQ(*number(t, "two", "throughput"), 158.0);
}

TEST_F(TwoDdpRuns, BadInputNamesEveryProblem) {
  try {
    CompareOptions options;
    options.columns = {"throughput", "speed"};
    options.baseline = "three";
    compare_runs(db.store, {"one", "nope", "two", "gone"}, options);
    FAIL() << "no error";
  } catch (const CompareError& e) {
    const auto& p = e.problems();
    ASSERT_EQ(p.size(), 4u) << e.what();
    EXPECT_NE(p[0].find("unknown column \"speed\" (known: run, experiment"), std::string::npos);
    EXPECT_NE(p[1].find("no run \"nope\""), std::string::npos);
    EXPECT_NE(p[2].find("no run \"gone\""), std::string::npos);
    EXPECT_NE(p[3].find("baseline \"three\" is not among the compared runs (one,nope,two,gone)"),
              std::string::npos);
  }
  EXPECT_THROW(compare_runs(db.store, {}), CompareError);
  EXPECT_THROW(runs_of_experiment(db.store, "no such experiment"), CompareError);
  EXPECT_EQ(runs_of_experiment(db.store, "ddp2"), std::vector<std::string>{"two"});
}

TEST_F(TwoDdpRuns, ConfigDiffHoldsOnlyTheKeysThatDiffer) {
  ExperimentConfig other = ddp(2);
  other.name = "resnet";
  other.model = ModelKind::resnet18;
  other.optimizer.lr = 0.1;
  db.add_run("resnet", other);
  db.store.flush();
  const auto t = compare_runs(db.store, {"one", "two", "resnet"});
  const std::vector<std::string> keys{"model", "name", "optimizer.lr", "ranks_per_node"};
  EXPECT_EQ(t.config_diff.keys, keys);
  EXPECT_EQ(t.config_diff.values[0],
            (std::vector<std::string>{"small_cnn", "small_cnn", "resnet18"}));
  EXPECT_EQ(t.config_diff.values[2], (std::vector<std::string>{"0.01", "0.01", "0.1"}));
  EXPECT_EQ(t.config_diff.values[3], (std::vector<std::string>{"1", "2", "2"}));
  // A key one config lacks differs too.
  const auto diff = config_diff({R"({"a":1,"b":{"c":2}})", R"({"a":1})"});
  EXPECT_EQ(diff.keys, std::vector<std::string>{"b.c"});
  EXPECT_EQ(diff.values[0], (std::vector<std::string>{"2", "—"}));
}

TEST_F(TwoDdpRuns, RepeatsOfOneConfigShowTheirAccuracySpread) {
  int seed = 1;
  for (double acc : {0.9582, 0.9589, 0.9596}) {
    auto c = ddp(4);
    c.seed = static_cast<uint64_t>(seed);
    const auto id = "rep" + std::to_string(seed++);
    db.add_run(id, c);
    db.add_epoch(id, 0, 10.0, acc);
  }
  db.store.flush();
  const auto t = compare_runs(db.store, {"one", "rep1", "rep2", "rep3"});
  EXPECT_EQ(text(t, "rep2", "acc_test_repeats"), "95.89±0.07 (3 runs)");
  EXPECT_EQ(text(t, "one", "acc_test_repeats"), "—");  // no repeat of its config
}

TEST(Compare, PipelineEfficiencyBesideTheGpipeBound) {
  ScratchDb db;
  ExperimentConfig c;
  c.name = "pipe";
  c.strategy = Strategy::pipeline;
  c.ranks_per_node = 2;
  c.chunks = 4;
  db.add_run("pipe", c);
  // Stage 0 computes 6 of 10 ms, stage 1 (the lead) 8 of 12: 14 / 24.
  for (int64_t step = 1; step <= 20; ++step)
    for (int64_t stage : {0, 1}) {
      records::Step s;
      s.rank = stage;
      s.stage = stage;
      s.step = step;
      s.loss = stage == 1 ? std::optional<double>(0.5) : std::nullopt;
      s.busy_ms = stage == 0 ? 6 : 8;
      s.step_ms = stage == 0 ? 10 : 12;
      s.samples = 4;
      s.samples_per_s = 40;
      db.add("pipe", stage, "step", records::to_line(s));
    }
  // The cut rank 0 ran, found by cost; and a run given its cut (a seed's own).
  records::Start start;
  start.balance = {3, 17};
  db.add("pipe", 0, "start", records::to_line(start));
  c.name = "given";
  c.balance = {19, 1};
  db.add_run("given", c);
  start.balance = {19, 1};
  db.add("given", 0, "start", records::to_line(start));
  db.store.flush();
  const auto t = compare_runs(db.store, {"pipe", "given"});
  EXPECT_EQ(text(t, "pipe", "balance"), "3+17 (by cost)");
  EXPECT_EQ(text(t, "given", "balance"), "19+1 (given)");
  EXPECT_DOUBLE_EQ(*number(t, "pipe", "pipeline_eff_pct"), 100.0 * 14.0 / 24.0);
  EXPECT_DOUBLE_EQ(*number(t, "pipe", "pipeline_bound_pct"), 80.0);  // 4 / (4 + 2 - 1)
  EXPECT_DOUBLE_EQ(*number(t, "pipe", "chunks"), 4.0);
  EXPECT_DOUBLE_EQ(*number(t, "pipe", "global_batch"), 64.0);  // one replica
}

TEST(Compare, CpuMemoryIsTheLargestRankRssTheAgentsSaw) {
  ScratchDb db;
  db.add_run("mem", ddp(2));
  db.add_steps("mem", 0, 6, 0);
  db.add("mem", -1, "system", R"({"type":"system","rank_rss":{"0":104857600,"1":209715200}})");
  db.add("mem", -1, "system", R"({"type":"system","rank_rss":{"0":157286400,"1":104857600}})");
  db.store.flush();
  const auto t = compare_runs(db.store, {"mem"});
  EXPECT_DOUBLE_EQ(*number(t, "mem", "peak_mem_mib"), 200.0);
}

// Seed 003's rx/tx per server per epoch, as the engine read each node's
// counters around its epochs: the last epoch, said by the lowest rank on the
// node; the agents' samples are not used when the engine's readings exist.
TEST(Compare, NicTrafficIsEachNodesLastEpochAsTheEngineReadIt) {
  ScratchDb db;
  auto config = ddp(2);
  config.nodes = {"flh1", "flh2"};
  db.add_run("nic", config);
  db.add_steps("nic", 0, 6, 0);
  const auto epoch = [&](const std::string& node, int64_t rank, int64_t index, int64_t rx,
                         int64_t tx) {
    records::Epoch e;
    e.rank = rank;
    e.epoch = index;
    e.epoch_s = 1;
    e.nic_rx_bytes = rx;
    e.nic_tx_bytes = tx;
    db.add("nic", rank, "epoch", records::to_line(e), node);
  };
  epoch("flh1", 0, 0, 900'000'000, 900'000'000);  // the first epoch: not the one shown
  epoch("flh1", 1, 1, 7'000'000, 8'000'000);      // the node's second rank says the same later
  epoch("flh1", 0, 1, 801'000'000, 802'500'000);
  epoch("flh2", 2, 1, 803'000'000, 804'000'000);
  epoch("flh2", 3, 1, 1'000'000, 1'000'000);
  db.add("nic", -1, "system", R"({"type":"system","nic_rx":5,"nic_tx":6})", "flh1");
  db.add("nic", -1, "system", R"({"type":"system","nic_rx":5000000005,"nic_tx":6})", "flh1");
  db.store.flush();
  const auto t = compare_runs(db.store, {"nic"}, {std::nullopt, {"run", "nic_mb_epoch"}});
  EXPECT_EQ(text(t, "nic", "nic_mb_epoch"), "flh1 801.0/802.5, flh2 803.0/804.0");
  // As numbers, the mean over the nodes (seed 003's table's figure).
  const auto nic_table =
      compare_runs(db.store, {"nic"}, {std::nullopt, {"nic_rx_mb_epoch", "nic_tx_mb_epoch"}});
  EXPECT_DOUBLE_EQ(*number(nic_table, "nic", "nic_rx_mb_epoch"), 802.0);
  EXPECT_DOUBLE_EQ(*number(nic_table, "nic", "nic_tx_mb_epoch"), 803.25);
}

// Runs recorded before the engine read its counters: each node's counter
// span over the run's epochs; a node's readings out of order still give the span.
TEST(Compare, NicTrafficOfAnOlderRunIsEachNodesCounterSpanPerEpoch) {
  ScratchDb db;
  auto config = ddp(1);
  config.nodes = {"flh1", "flh2"};
  db.add_run("nic", config);
  db.add_steps("nic", 0, 6, 0);
  db.add_epoch("nic", 0, 10.0, 0.5);
  db.add_epoch("nic", 1, 10.0, 0.6);
  const auto system = [&](const std::string& node, int64_t rx, int64_t tx) {
    db.add("nic", -1, "system",
           R"({"type":"system","nic_rx":)" + std::to_string(rx) + R"(,"nic_tx":)" +
               std::to_string(tx) + "}",
           node);
  };
  system("flh1", 5'000'000, 7'000'000);
  system("flh2", 1'000'000, 2'000'000);
  system("flh1", 405'000'000, 207'000'000);
  system("flh2", 61'000'000, 82'000'000);
  system("flh2", 31'000'000, 42'000'000);  // sampled earlier, stored later
  db.store.flush();
  const auto t = compare_runs(db.store, {"nic"}, {std::nullopt, {"run", "nic_mb_epoch"}});
  // flh1: 400 MB rx, 200 MB tx over 2 epochs; flh2: 60 and 80 MB.
  EXPECT_EQ(text(t, "nic", "nic_mb_epoch"), "flh1 200.0/100.0, flh2 30.0/40.0");
}

TEST(Compare, NicTrafficWithoutEpochsOrCountersIsEmpty) {
  ScratchDb db;
  db.add_run("bare", ddp(1));
  db.add_steps("bare", 0, 6, 0);
  db.add("bare", -1, "system", R"({"type":"system","nic_rx":5,"nic_tx":6})");
  db.add_run("quiet", ddp(1));
  db.add_steps("quiet", 0, 6, 0);
  db.add_epoch("quiet", 0, 10.0, 0.5);
  db.store.flush();
  const auto t = compare_runs(db.store, {"bare", "quiet"}, {std::nullopt, {"nic_mb_epoch"}});
  EXPECT_EQ(text(t, "bare", "nic_mb_epoch"), "—");   // no epoch to divide by
  EXPECT_EQ(text(t, "quiet", "nic_mb_epoch"), "—");  // no agent counters
}

TEST(Compare, LinkUtilisationIsBusbwOverTheSweepAtTheRunsMessageSize) {
  ScratchDb db;
  // A sweep of the run's nodes: 1 KiB at 1 GB/s, 4 KiB at 3 GB/s.
  auto bench = ddp(2);
  bench.name = "link bench local";
  db.add_run("sweep", bench);
  add_link_bench(db.store,
                 {"sweep", node_set_key({"local"}), 2, "cpu", now_ms(), RunState::finished});
  db.add(
      "sweep", 0, "bench",
      R"({"type":"bench","op":"allreduce","bytes":1024,"time_us":5,"algbw_gbps":0.5,"busbw_gbps":1.0,"ranks":2})");
  db.add(
      "sweep", 1, "bench",
      R"({"type":"bench","op":"allreduce","bytes":1024,"time_us":9,"algbw_gbps":0.1,"busbw_gbps":0.2,"ranks":2})");
  db.add(
      "sweep", 0, "bench",
      R"({"type":"bench","op":"allreduce","bytes":4096,"time_us":5,"algbw_gbps":1.5,"busbw_gbps":3.0,"ranks":2})");
  // The send/receive sweep beside it is the bench's too, not an all-reduce size.
  db.add(
      "sweep", 0, "bench",
      R"({"type":"bench","op":"sendrecv","bytes":1024,"time_us":30,"algbw_gbps":0.03,"busbw_gbps":0.03,"ranks":2})");
  // And both again with every rank computing beside them.
  db.add(
      "sweep", 0, "bench",
      R"({"type":"bench","op":"sendrecv_computing","bytes":1024,"time_us":700,"algbw_gbps":0.0015,"busbw_gbps":0.0015,"ranks":2})");
  db.add(
      "sweep", 0, "bench",
      R"({"type":"bench","op":"allreduce_computing","bytes":1024,"time_us":11,"algbw_gbps":0.09,"busbw_gbps":0.09,"ranks":2})");
  // Both ranks ran on one machine (one boot id), which the prediction is told.
  db.add("sweep", 0, "start",
         R"({"type":"start","rank":0,"world_size":2,"machine":"boot-1","cores":2})");
  // The run all-reduces 2048 bytes a step at 1 GB/s busbw: the link gives
  // 2 GB/s at 2 KiB (halfway in log size), so 50 %.
  db.add_run("train", ddp(2));
  db.add_steps("train", 0, 10, 0, true, 1.0, 2048);
  db.store.flush();
  CompareOptions options;
  options.columns = {"run", "busbw_gbps", "link_busbw_gbps", "link_util_pct"};
  const auto t = compare_runs(db.store, {"train", "sweep"}, options);
  EXPECT_DOUBLE_EQ(*number(t, "train", "link_busbw_gbps"), 2.0);
  EXPECT_DOUBLE_EQ(*number(t, "train", "link_util_pct"), 50.0);
  EXPECT_TRUE(has_note(t, "sweep", "a link bench"));
  EXPECT_TRUE(t.warnings.empty());

  const auto stored = latest_link_bench(db.store, {"local"});
  ASSERT_TRUE(stored.has_value());
  ASSERT_EQ(stored->points.size(), 2u);
  EXPECT_DOUBLE_EQ(stored->points[0].busbw_gbps, 1.0);  // rank 0's, not rank 1's
  EXPECT_EQ(stored->points[1].bytes, 4096);
  EXPECT_FALSE(latest_link_bench(db.store, {"flh1", "flh2"}).has_value());

  // As the prediction's --links file: every size, its time and busbw, the bench named.
  const auto links = nlohmann::json::parse(link_measurements_json(*stored));
  EXPECT_EQ(links.at("ranks").get<int64_t>(), 2);
  EXPECT_EQ(links.at("run").get<std::string>(), "sweep");
  EXPECT_NE(links.at("source").get<std::string>().find("over local (2 ranks, cpu, run sweep"),
            std::string::npos)
      << links.dump();
  ASSERT_EQ(links.at("allreduce").size(), 2u);
  EXPECT_EQ(links["allreduce"][0].at("bytes").get<int64_t>(), 1024);
  EXPECT_DOUBLE_EQ(links["allreduce"][0].at("time_us").get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(links["allreduce"][1].at("busbw_gbps").get<double>(), 3.0);
  ASSERT_EQ(stored->p2p.size(), 1u);
  ASSERT_EQ(links.at("p2p").size(), 1u);
  EXPECT_EQ(links["p2p"][0].at("bytes").get<int64_t>(), 1024);
  EXPECT_DOUBLE_EQ(links["p2p"][0].at("time_us").get<double>(), 30.0);
  ASSERT_EQ(links.at("p2p_computing").size(), 1u);
  EXPECT_DOUBLE_EQ(links["p2p_computing"][0].at("time_us").get<double>(), 700.0);
  ASSERT_EQ(links.at("allreduce_computing").size(), 1u);
  EXPECT_EQ(links["allreduce_computing"][0].at("bytes").get<int64_t>(), 1024);
  EXPECT_DOUBLE_EQ(links["allreduce_computing"][0].at("time_us").get<double>(), 11.0);
  EXPECT_DOUBLE_EQ(links["allreduce_computing"][0].at("busbw_gbps").get<double>(), 0.09);
  ASSERT_EQ(stored->nodes.count("local"), 1u);
  EXPECT_EQ(stored->nodes.at("local").machine, "boot-1");
  EXPECT_EQ(links.at("nodes").at("local").at("machine").get<std::string>(), "boot-1");
  EXPECT_EQ(links["nodes"]["local"].at("cores").get<int64_t>(), 2);
}

// `flotilla run --predict` keeps the plan's prediction with the run: compare
// sets it against the steady throughput the run measured.
TEST(Compare, APredictionKeptWithARunIsSetAgainstItsMeasuredThroughput) {
  ScratchDb db;
  db.add_run("predicted", ddp(1));
  db.add_steps("predicted", 0, 10, 0);  // a steady 108 samples/s
  db.add_run("unpredicted", ddp(1));
  db.add_steps("unpredicted", 0, 10, 0);
  db.store.flush();
  set_run_prediction(db.store, "predicted",
                     R"({"type": "plan", "prediction": {"step_ms": 474.07, "samples_per_s": 135,
                         "samples_per_step": 64, "links": null}})");
  EXPECT_THROW(set_run_prediction(db.store, "unpredicted", R"({"type": "plan"})"), StoreError);
  const auto kept = run_prediction(db.store, "predicted");
  ASSERT_TRUE(kept);
  EXPECT_DOUBLE_EQ(kept->samples_per_s, 135.0);
  EXPECT_TRUE(kept->links.empty());
  EXPECT_FALSE(run_prediction(db.store, "unpredicted"));

  CompareOptions options;
  options.columns = {"run", "throughput", "predicted_throughput", "prediction_err_pct"};
  const auto t = compare_runs(db.store, {"predicted", "unpredicted"}, options);
  EXPECT_DOUBLE_EQ(*number(t, "predicted", "throughput"), 108.0);
  EXPECT_DOUBLE_EQ(*number(t, "predicted", "predicted_throughput"), 135.0);
  EXPECT_DOUBLE_EQ(*number(t, "predicted", "prediction_err_pct"), 25.0);
  EXPECT_EQ(text(t, "unpredicted", "predicted_throughput"), "—");
  EXPECT_EQ(text(t, "unpredicted", "prediction_err_pct"), "—");
}

// The predicted peak memory beside the largest rank's measured one (200 MiB
// from the agents' system records).
TEST(Compare, APredictedPeakMemoryIsSetAgainstTheLargestRanksMeasuredOne) {
  ScratchDb db;
  db.add_run("predicted", ddp(2));
  db.add_steps("predicted", 0, 10, 0);
  db.add("predicted", -1, "system",
         R"({"type":"system","rank_rss":{"0":104857600,"1":209715200}})");
  db.store.flush();
  set_run_prediction(db.store, "predicted",
                     R"({"type": "plan", "prediction": {"step_ms": 474.07, "samples_per_s": 135,
                         "samples_per_step": 64, "links": null, "peak_memory_bytes": 230686720}})");
  CompareOptions options;
  options.columns = {"run", "peak_mem_mib", "predicted_peak_mem_mib", "peak_mem_err_pct"};
  const auto t = compare_runs(db.store, {"predicted"}, options);
  EXPECT_DOUBLE_EQ(*number(t, "predicted", "peak_mem_mib"), 200.0);
  EXPECT_DOUBLE_EQ(*number(t, "predicted", "predicted_peak_mem_mib"), 220.0);
  EXPECT_DOUBLE_EQ(*number(t, "predicted", "peak_mem_err_pct"), 10.0);
}

TEST(Compare, LinkUtilisationWithoutASweepSaysHowToMeasureOne) {
  ScratchDb db;
  db.add_run("train", ddp(2));
  db.add_steps("train", 0, 10, 0, true, 1.0, 2048);
  db.store.flush();
  const auto t = compare_runs(db.store, {"train"});
  EXPECT_FALSE(number(t, "train", "link_util_pct"));
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("flotilla nodes bench local"), std::string::npos);
}

TEST_F(TwoDdpRuns, FormatsCarryTheSameNumbers) {
  CompareOptions options;
  options.columns = {"run", "ranks", "throughput", "speedup", "scaling_eff", "notes"};
  const auto t = compare_runs(db.store, {"one", "two"}, options);

  const auto md = format_compare(t, CompareFormat::markdown);
  EXPECT_NE(md.find("| run | ranks | samples/s | speed-up | scaling eff | notes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| --- | ---: | ---: | ---: | ---: | --- |"), std::string::npos) << md;
  EXPECT_NE(md.find("| two | 2 | 158.0 | 1.463 | 0.731 | — |"), std::string::npos) << md;
  EXPECT_NE(md.find("### Config diff"), std::string::npos);

  const auto csv = format_compare(t, CompareFormat::csv);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "run,ranks,throughput,speedup,scaling_eff,notes");
  EXPECT_NE(csv.find("two,2,158," + format_number(158.0 / 108.0) + "," +
                     format_number(158.0 / 108.0 / 2.0) + ","),
            std::string::npos)
      << csv;

  const auto j = json::parse(format_compare(t, CompareFormat::json));
  EXPECT_EQ(j["baseline"], "one");
  EXPECT_DOUBLE_EQ(j["rows"][1]["values"]["speedup"].get<double>(), 158.0 / 108.0);
  EXPECT_TRUE(j["rows"][1]["values"]["notes"].is_null());
  EXPECT_EQ(j["rows"][0]["notes"][0], "baseline");
  EXPECT_TRUE(j["config_diff"].contains("ranks_per_node"));

  const auto table = format_compare(t, CompareFormat::table);
  EXPECT_NE(table.find("baseline: one"), std::string::npos);
}

TEST_F(TwoDdpRuns, NumbersPrintWithAPointInAnyLocale) {
  const std::string previous = std::setlocale(LC_ALL, nullptr);
  bool comma = false;
  for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8"})
    if (std::setlocale(LC_ALL, name)) {
      comma = true;
      break;
    }
  if (!comma) GTEST_SKIP() << "no comma-decimal locale (scripts/setup.sh generates de_DE.UTF-8)";
  const auto t = compare_runs(db.store, {"one", "two"});
  const auto md = format_compare(t, CompareFormat::markdown);
  const auto csv = format_compare(t, CompareFormat::csv);
  std::setlocale(LC_ALL, previous.c_str());
  EXPECT_NE(md.find("158.0"), std::string::npos);
  EXPECT_EQ(md.find("158,0"), std::string::npos);
  EXPECT_NE(csv.find(format_number(158.0 / 108.0)), std::string::npos);
}

}  // namespace
}  // namespace flotilla::controller
