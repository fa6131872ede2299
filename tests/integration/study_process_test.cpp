// `flotilla study run` as real processes: the dp-scaling study at cpu scale
// (seed 004's table) trained on this machine, its report read back and its
// speed-ups checked against the steady throughputs of the stored step records.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "cli_fixture.h"
#include "flotilla/controller/sweep_store.h"
#include "flotilla/protocol/run_metrics.h"
#include "run_rows.h"
#include "study_files.h"

namespace flotilla::testing {
namespace {

using controller::PointState;
using controller::SweepStore;
using nlohmann::json;

// A point's GPU count: the seed's gpu_nums, a variant label.
int gpus_of(const json& values) {
  return std::stoi(values["gpu_nums"].get<std::string>());
}

TEST(FlotillaStudy, DpScalingCpuReportsSeed004sColumnsWithSpeedUpTheRatioOfSteadyThroughputs) {
  Flotilla f;
  f.store().create_run(minimal_run("not-of-the-study"));  // the database holds other runs too
  const auto dir = f.dir().path() / "report";
  const auto [status, output] = f.run(
      {"study", "run", "dp-scaling", "--scale", "cpu", "--name", "dp", "-o", dir.string()}, 540s);
  ASSERT_EQ(status, 0) << output;

  // Seed 004's columns, in its order, with its names.
  const std::string seed_header =
      "| gpu_nums | batch_size | time (s) | speedup | calculation time (s) | communication time "
      "(s) | bandwidth utilisation (G params/s, the seed's way) | wire GB/s | measured epoch 2 (s) "
      "|";
  const auto report = read_text(dir / "report.md");
  EXPECT_NE(report.find("\n" + seed_header), std::string::npos) << report;
  const auto study = read_text(dir / "study.csv");
  EXPECT_EQ(study.rfind("gpu_nums,batch_size,time (s),speedup,calculation time (s),communication "
                        "time (s),\"bandwidth utilisation (G params/s, the seed's way)\",wire "
                        "GB/s,measured epoch 2 (s),",
                        0),
            0u)
      << study;
  EXPECT_TRUE(std::filesystem::exists(dir / "throughput.png"));

  // Every point of the grid ran, once.
  auto store = f.store();
  SweepStore sweeps(store);
  const auto sweep = sweeps.sweep("dp");
  ASSERT_TRUE(sweep);
  const auto points = sweeps.points(sweep->id);
  ASSERT_EQ(points.size(), 12u);  // 3 rank counts x 4 batches
  std::map<std::string, json> values_of_run;
  for (const auto& point : points) {
    EXPECT_EQ(point.state, PointState::finished) << point.values_json << " " << point.reason;
    values_of_run[point.run_id] = json::parse(point.values_json);
  }
  ASSERT_EQ(values_of_run.size(), 12u);

  // The batch is global, as the seed's DataParallel batch: at every GPU
  // count an epoch is 8192 / b steps (the seed's 50000 / b iterations) of b
  // samples, each of the N ranks training b / N of them.
  for (const auto& [run, values] : values_of_run) {
    const int64_t batch = values["batch_size"].get<int64_t>(), gpus = gpus_of(values);
    std::set<int64_t> ranks_seen;
    for (const auto& record : store.records(run)) {
      const auto body = json::parse(record.body);
      if (record.type == "start") {
        EXPECT_EQ(body["steps_per_epoch"].get<int64_t>(), 8192 / batch) << run;
      }
      if (record.type == "step") {
        EXPECT_EQ(body["samples"].get<int64_t>(), batch) << run;
      }
      if (record.type == "end") {
        EXPECT_EQ(body["batch_size"].get<int64_t>(), batch / gpus) << run;
        ranks_seen.insert(record.rank);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(ranks_seen.size()), gpus) << run;
  }

  // Speed-up (summary.csv: numbers in full) is each run's steady throughput
  // over that of the one-rank run of the same batch.
  std::map<int, double> one_rank;  // batch -> throughput
  for (const auto& [run, values] : values_of_run)
    if (gpus_of(values) == 1) one_rank[values["batch_size"]] = stored_throughput(store, run);
  ASSERT_EQ(one_rank.size(), 4u);
  size_t checked = 0;
  for (const auto& row : csv_rows(read_text(dir / "summary.csv"))) {
    const auto found = values_of_run.find(row.at("run"));
    ASSERT_NE(found, values_of_run.end()) << row.at("run");
    const double expected =
        stored_throughput(store, found->first) / one_rank.at(found->second["batch_size"]);
    const double shown = std::stod(row.at("speedup"));
    EXPECT_NEAR(shown, expected, 1e-9 * expected) << found->first << " " << found->second;
    if (gpus_of(found->second) == 1) {
      EXPECT_DOUBLE_EQ(shown, 1.0);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 12u);

  // "Seed vs ours" opens the report, generated: the seed's speed-up of each
  // row beside ours, which is the one recomputed here from the stored steps.
  const auto seed_at = report.find("## Seed vs ours");
  ASSERT_NE(seed_at, std::string::npos) << report;
  EXPECT_LT(seed_at, report.find("## Study table"));
  const std::map<std::pair<int, int>, double> seed_speedup{
      {{2, 32}, 0.567164}, {{2, 128}, 0.888889}, {{4, 512}, 1.181818}, {{1, 2048}, 1.0}};
  size_t compared = 0;
  for (const auto& row : csv_rows(read_text(dir / "seed_vs_ours.csv"))) {
    const int ranks = std::stoi(row.at("gpu_nums")), batch = std::stoi(row.at("batch_size"));
    std::string run;
    for (const auto& [id, values] : values_of_run)
      if (gpus_of(values) == ranks && values["batch_size"] == batch) run = id;
    ASSERT_FALSE(run.empty()) << ranks << " " << batch;
    const double ours = stored_throughput(store, run) / one_rank.at(batch);
    EXPECT_NEAR(std::stod(row.at("speedup ours")), ours, 1e-9 * ours) << run;
    EXPECT_NEAR(std::stod(row.at("speedup ratio")), ours / std::stod(row.at("speedup seed")),
                1e-9 * ours);
    if (const auto seed = seed_speedup.find({ranks, batch}); seed != seed_speedup.end()) {
      EXPECT_DOUBLE_EQ(std::stod(row.at("speedup seed")), seed->second);
      ++compared;
    }
  }
  EXPECT_EQ(compared, seed_speedup.size());

  // The chart in the seed's shape follows "Seed vs ours": speed-up against
  // ranks, a line per batch size whose points are the speed-ups above, and
  // the seed's own lines beside them.
  const auto chart_at = report.find("## Chart");
  ASSERT_NE(chart_at, std::string::npos) << report;
  EXPECT_LT(seed_at, chart_at);
  EXPECT_LT(chart_at, report.find("## Study table"));
  EXPECT_NE(report.find("](study_chart.png)", chart_at), std::string::npos) << report;
  EXPECT_TRUE(std::filesystem::exists(dir / "study_chart.png"));
  const auto chart = json::parse(read_text(dir / "study_chart.json"));
  size_t our_points = 0, seed_lines = 0;
  for (const auto& line : chart["series"]) {
    if (line["source"] == "seed") {
      ++seed_lines;
      continue;
    }
    const int batch = std::stoi(line["name"].get<std::string>().substr(strlen("batch_size ")));
    for (const auto& point : line["points"]) {
      std::string run;
      for (const auto& [id, values] : values_of_run)
        if (gpus_of(values) == point["x"].get<double>() && values["batch_size"] == batch) run = id;
      ASSERT_FALSE(run.empty()) << line.dump();
      const double ours = stored_throughput(store, run) / one_rank.at(batch);
      EXPECT_NEAR(point["y"].get<double>(), ours, 1e-9 * ours) << run;
      ++our_points;
    }
  }
  EXPECT_EQ(our_points, 12u);
  EXPECT_EQ(seed_lines, 4u);  // the seed's batch sizes 32, 128, 512 and 2048

  // The study's runs are kept beside the report, whole, and only they; the
  // report names no path of this machine.
  controller::Store kept(QString::fromStdString((dir / "study.db").string()));
  std::set<std::string> kept_runs;
  for (const auto& run : kept.runs()) kept_runs.insert(run.id);
  std::set<std::string> study_runs;
  for (const auto& [run, values] : values_of_run) study_runs.insert(run);
  EXPECT_EQ(kept_runs, study_runs);
  for (const auto& run : study_runs)
    EXPECT_EQ(kept.records(run).size(), store.records(run).size()) << run;
  ASSERT_TRUE(SweepStore(kept).sweep("dp"));
  EXPECT_EQ(SweepStore(kept).points(SweepStore(kept).sweep("dp")->id).size(), 12u);
  EXPECT_EQ(report.find(f.dir().path().string()), std::string::npos) << report;
  EXPECT_NE(report.find("Made by `flotilla study run dp-scaling --scale cpu --name dp`"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("from `study.db`"), std::string::npos) << report;
}

TEST(FlotillaStudy, BadStudiesAreRefusedNamingTheField) {
  Flotilla f;
  const auto out = (f.dir().path() / "r").string();
  const auto [unknown, unknown_out] = f.run({"study", "run", "dp-scalin", "-o", out});
  EXPECT_EQ(unknown, 2);
  EXPECT_NE(unknown_out.find("study: no study \"dp-scalin\" (known: dp-scaling, "),
            std::string::npos)
      << unknown_out;
  const auto [scale, scale_out] =
      f.run({"study", "run", "dp-scaling", "--scale", "tpu", "-o", out});
  EXPECT_EQ(scale, 2);
  EXPECT_NE(scale_out.find("--scale: expected cpu, gpu or gpu1, got \"tpu\""), std::string::npos)
      << scale_out;
  const auto [no_dir, no_dir_out] = f.run({"study", "run", "dp-scaling"});
  EXPECT_EQ(no_dir, 2);
  EXPECT_NE(no_dir_out.find("-o DIR: the report's directory is required"), std::string::npos)
      << no_dir_out;
  const auto file = f.dir().write("bad.yaml", R"(
name: bad
base: {model: small_cnn, dataset: synthetic, max_steps: 2}
axes: {batch_size: [8, 16]}
report:
  columns: [batch_size, {speedp: speed-up}]
  baseline: {batchsize: 8}
)");
  const auto [bad, bad_out] = f.run({"study", "run", file.string(), "-o", out});
  EXPECT_EQ(bad, 2);
  EXPECT_NE(bad_out.find("report.baseline.batchsize: \"batchsize\" is neither an axis of this "
                         "sweep nor a config key"),
            std::string::npos)
      << bad_out;
  const auto fixed = f.dir().write("bad2.yaml", R"(
name: bad2
base: {model: small_cnn, dataset: synthetic, max_steps: 2}
axes: {batch_size: [8, 16]}
report: {columns: [batch_size, speedp]}
)");
  const auto [column, column_out] = f.run({"study", "run", fixed.string(), "-o", out});
  EXPECT_EQ(column, 2);
  EXPECT_NE(column_out.find("report.columns: unknown column \"speedp\"; give an axis (batch_size)"),
            std::string::npos)
      << column_out;
  EXPECT_FALSE(std::filesystem::exists(out));  // nothing ran, nothing written
  EXPECT_TRUE(f.store().runs().empty());
}

// Every carried study at every scale validates, and each exit is the one
// expected: 0 for cpu and gpu1 (synthetic data, one GPU); at gpu scale the
// points on CIFAR-10 are refused only for what this machine lacks, its files
// (a point refused for anything else fails here), and pipe-vs-ddp-memory's
// two-node pipelines are given the two nodes they need.
TEST(FlotillaStudy, EveryCarriedStudyDryRunsAtEveryScale) {
  Flotilla f;
  const auto [listed, list] = f.run({"study", "list"});
  EXPECT_EQ(listed, 0) << list;
  // Stored only: a dry run connects to no node.
  for (const char* node : {"a", "b"})
    ASSERT_EQ(f.run({"nodes", "add", node, "--host", "127.0.0.1"}).first, 0);
  const std::string no_cifar =
      "data_dir: \"data/cifar-10-batches-bin\" is not a directory (dataset \"cifar10\")";
  for (const std::string study : {"dp-scaling", "pipe-vs-ddp-memory", "pipeline-vs-dp",
                                  "sort-quantization", "vgg-freeze-traffic", "pipetransformer"}) {
    // Each study's line names its three scales, apart from its description.
    EXPECT_NE(list.find(study + std::string(22 - study.size(), ' ') + "cpu,gpu,gpu1  seed"),
              std::string::npos)
        << list;
    // The seed 000 studies' gpu files are two machines' runs.
    const bool two_machines = study == "pipe-vs-ddp-memory" || study == "pipetransformer";
    for (const std::string scale : {"cpu", "gpu1", "gpu"}) {
      std::vector<std::string> args{"study", "run", study, "--scale", scale, "--dry-run"};
      if (scale == "gpu" && two_machines) args.insert(args.end(), {"--nodes", "a,b"});
      const auto [status, output] = f.run(args);
      const std::string what = study + " " + scale + ":\n" + output;
      EXPECT_EQ(output.find("report."), std::string::npos) << what;
      const bool needs_cifar = scale == "gpu" && !two_machines;
      if (!needs_cifar) {
        EXPECT_EQ(status, 0) << what;
        EXPECT_EQ(output.find("refused before anything starts"), std::string::npos) << what;
        continue;
      }
      // The CIFAR-10 points refused, each point's reason (an indented line
      // under "point N") the missing data and nothing else; the sweep refused
      // as a whole (2) but for pipeline-vs-dp, whose RoBERTa rows are synthetic.
      EXPECT_EQ(status, study == "pipeline-vs-dp" ? 0 : 2) << what;
      std::istringstream lines(output);
      int reasons = 0;
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("    ", 0) != 0) continue;
        ++reasons;
        EXPECT_EQ(line.substr(4), no_cifar) << what;
      }
      EXPECT_GT(reasons, 0) << what;
    }
  }
}

}  // namespace
}  // namespace flotilla::testing
