// `flotilla sweep` as real processes: controller, agent and ranks on the local
// node, the sweep's queue read back from the database.
#include <set>

#include "cli_fixture.h"
#include "flotilla/controller/run_prediction.h"
#include "flotilla/controller/sweep_store.h"
#include "study_files.h"

namespace flotilla::testing {
namespace {

using controller::PointState;
using controller::RunState;
using controller::SweepPointRow;
using controller::SweepState;
using controller::SweepStore;
using nlohmann::json;

// `yaml` as the value of a mapping key: every line indented by two.
std::string indented(const std::string& yaml) {
  std::string out;
  std::istringstream lines(yaml);
  for (std::string line; std::getline(lines, line);) out += "  " + line + "\n";
  return out;
}

// A sweep over the Fashion-MNIST preset, one rank of one thread, `extra` keys
// added to the base.
std::string fashion_sweep(const std::string& name, const std::string& extra,
                          const std::string& axes) {
  return "name: " + name + "\nbase:\n" + indented(preset_with("\nthreads: 1\n" + extra)) +
         "axes:\n" + axes;
}

std::vector<SweepPointRow> points_of(const Flotilla& f, const std::string& sweep) {
  auto store = f.store();
  SweepStore sweeps(store);
  const auto row = sweeps.sweep(sweep);
  return row ? sweeps.points(row->id) : std::vector<SweepPointRow>{};
}

// Polls the database until point `index` of `sweep` is running a run that has
// stored `records` records; its run id, or empty after `limit`.
std::string wait_for_point_running(const Flotilla& f, const std::string& sweep, size_t index,
                                   size_t records, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(f.dir().path() / "flotilla.db")) {
      const auto points = points_of(f, sweep);
      if (points.size() > index && points[index].state == PointState::running &&
          !points[index].run_id.empty() &&
          f.store().records(points[index].run_id).size() >= records)
        return points[index].run_id;
    }
    std::this_thread::sleep_for(200ms);
  }
  ADD_FAILURE() << "point " << index << " of " << sweep << " not running with " << records
                << " records within " << limit.count() << " s";
  return {};
}

TEST(FlotillaSweep, ABatchLadderUnderAMemoryLimitStopsAtItsOom) {
  Flotilla f;
  // 450 MiB of data segment per rank: the small CNN trains batches of 64 and
  // 256 (about 330 MiB) but not 2048 (about 1 GiB); this machine has plenty,
  // so the limit, set by the agent on the rank, is what runs out.
  const auto file = f.dir().write("ladder.yaml", R"(
name: ladder
base:
  model: small_cnn
  dataset: synthetic
  synthetic: {shape: [3, 32, 32], classes: 10, train_samples: 4096, test_samples: 16}
  threads: 1
  max_steps: 2
  limits: {memory_mb: 450}
axes:
  batch_size: {values: [64, 256, 2048, 4096], until: oom}
)");
  const auto [status, output] = f.run({"sweep", file.string()});
  EXPECT_EQ(status, 0) << output;  // an OOM is the ladder's end, not a failure
  const auto points = points_of(f, "ladder");
  ASSERT_EQ(points.size(), 4u) << output;
  EXPECT_EQ(points[0].state, PointState::finished) << points[0].reason;
  EXPECT_EQ(points[1].state, PointState::finished) << points[1].reason;
  EXPECT_EQ(points[2].state, PointState::oom) << points[2].reason;
  EXPECT_EQ(points[3].state, PointState::skipped);
  EXPECT_EQ(points[3].reason, "oom at batch_size 2048");
  EXPECT_TRUE(points[3].run_id.empty());
  EXPECT_NE(points[2].reason.find("(batch_size 2048)"), std::string::npos) << points[2].reason;

  auto store = f.store();
  EXPECT_EQ(store.runs().size(), 3u);  // the skipped point never ran
  const auto oom_run = store.run(points[2].run_id);
  ASSERT_TRUE(oom_run);
  EXPECT_EQ(oom_run->state, RunState::oom);
  const auto ends = bodies_of(store.records(oom_run->id), "end", 0);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["outcome"], "oom");
  EXPECT_EQ(ends[0]["batch_size"], 2048);
  for (size_t i : {0u, 1u}) {
    const auto run = store.run(points[i].run_id);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, RunState::finished);
    EXPECT_EQ(json::parse(run->config_json)["limits"]["memory_mb"], 450);
    EXPECT_EQ(bodies_of(store.records(run->id), "step", 0).size(), 2u);
  }
  EXPECT_NE(output.find("point 4 skipped: oom at batch_size 2048"), std::string::npos) << output;

  const auto [csv_status, csv] = f.run({"sweep", "show", "ladder", "--format", "csv"});
  EXPECT_EQ(csv_status, 0);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "#,batch_size,state,run,samples/s,reason");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5) << csv;
  EXPECT_NE(csv.find("4,4096,skipped,-,-,oom at batch_size 2048"), std::string::npos) << csv;
  const auto [json_status, shown] = f.run({"sweep", "show", "ladder", "--format", "json"});
  const auto j = json::parse(shown);
  EXPECT_EQ(j["sweep"]["state"], "finished");
  EXPECT_EQ(j["progress"]["finished"], 2);
  EXPECT_EQ(j["progress"]["oom"], 1);
  EXPECT_EQ(j["progress"]["skipped"], 1);
  EXPECT_GT(j["points"][1]["samples_per_s"].get<double>(), 0.0);
  EXPECT_TRUE(j["points"][3]["samples_per_s"].is_null());
  // The compare table of its runs: the three that ran, in point order, the
  // first the baseline, the OOM row kept.
  const auto& compared = j["compare"];
  ASSERT_TRUE(compared.is_object()) << shown;
  EXPECT_EQ(compared["runs"], json({points[0].run_id, points[1].run_id, points[2].run_id}));
  EXPECT_EQ(compared["baseline"], points[0].run_id);
  ASSERT_EQ(compared["rows"].size(), 3u);
  EXPECT_EQ(compared["rows"][2]["state"], "oom");
  const auto [table_status, table] = f.run({"sweep", "show", "ladder"});
  EXPECT_EQ(table_status, 0);
  EXPECT_NE(table.find("compare table of its 3 run(s):"), std::string::npos) << table;
  EXPECT_NE(table.find("baseline: " + points[0].run_id), std::string::npos) << table;
  const auto [md_status, markdown] = f.run({"sweep", "show", "ladder", "--format", "markdown"});
  EXPECT_EQ(markdown.substr(0, markdown.find('\n')),
            "| # | batch_size | state | run | samples/s | reason |");
  EXPECT_NE(markdown.find("### Compare table of its 3 run(s)"), std::string::npos) << markdown;
  const auto [list_status, list] = f.run({"sweeps"});
  EXPECT_NE(list.find("ladder"), std::string::npos) << list;
  EXPECT_NE(list.find("finished"), std::string::npos) << list;
}

TEST(FlotillaSweep, ContinuesAfterItsControllerIsKilledRunningEveryPointOnce) {
  Flotilla f;
  const auto file = f.dir().write(
      "survive.yaml",
      fashion_sweep("survive", "epochs: 1\nmax_steps: 120\n", "  batch_size: [16, 32, 48]\n"));
  auto runner = f.start({"sweep", file.string()}, "sweep.txt");
  const auto killed_run = wait_for_point_running(f, "survive", 1, 20, 180s);
  ASSERT_FALSE(killed_run.empty()) << runner->output();
  runner->kill(SIGKILL);
  ASSERT_TRUE(runner->wait(10s));
  ASSERT_EQ(f.store().run(killed_run)->state, RunState::running);  // the run goes on alone

  // Two controllers attach at once: one takes the sweep over, neither runs a
  // point the other runs.
  auto first = f.start({"attach"}, "attach-1.txt");
  auto second = f.start({"attach"}, "attach-2.txt");
  ASSERT_EQ(first->wait(300s), 0) << first->output();
  ASSERT_EQ(second->wait(300s), 0) << second->output();
  const std::string continuing = "continuing sweep survive";
  EXPECT_EQ((first->output().find(continuing) != std::string::npos) +
                (second->output().find(continuing) != std::string::npos),
            1)
      << first->output() << "\n----\n"
      << second->output();

  auto store = f.store();
  SweepStore sweeps(store);
  EXPECT_EQ(sweeps.sweep("survive")->state, SweepState::finished);
  const auto points = points_of(f, "survive");
  ASSERT_EQ(points.size(), 3u);
  std::set<std::string> runs;
  for (const auto& point : points) {
    EXPECT_EQ(point.state, PointState::finished) << point.reason;
    runs.insert(point.run_id);
  }
  EXPECT_EQ(points[1].run_id, killed_run);
  // Every point ran exactly once: one run each, and no other run at all.
  EXPECT_EQ(runs.size(), 3u);
  const auto all = store.runs();
  ASSERT_EQ(all.size(), 3u);
  for (const auto& run : all) {
    EXPECT_TRUE(runs.count(run.id)) << run.id;
    EXPECT_EQ(run.state, RunState::finished);
    EXPECT_EQ(bodies_of(store.records(run.id), "step", 0).size(), 120u) << run.id;
  }
  expect_complete(f, killed_run);
}

TEST(FlotillaSweep, KillStopsTheLiveRunAndSkipsTheQueue) {
  Flotilla f;
  const auto file = f.dir().write(
      "long.yaml", fashion_sweep("long", "epochs: 50\n", "  batch_size: [16, 32, 64]\n"));
  auto runner = f.start({"sweep", file.string()}, "sweep.txt");
  const auto run = wait_for_point_running(f, "long", 0, 10, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();
  const auto [status, output] = f.run({"sweep", "kill", "long", "--grace", "3"});
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("sweep long killed: 1 killed, 2 skipped"), std::string::npos) << output;
  EXPECT_EQ(runner->wait(60s), 4) << runner->output();
  EXPECT_TRUE(ranks_alive(run).empty());
  const auto points = points_of(f, "long");
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].state, PointState::killed);
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(points[i].state, PointState::skipped);
    EXPECT_EQ(points[i].reason, "the sweep was killed");
    EXPECT_TRUE(points[i].run_id.empty());
  }
  auto store = f.store();
  EXPECT_EQ(SweepStore(store).sweep("long")->state, SweepState::killed);
  EXPECT_EQ(store.runs().size(), 1u);
  expect_complete(f, run);
  const auto [again, again_output] = f.run({"sweep", "kill", "long"});
  EXPECT_EQ(again, 0);
  EXPECT_NE(again_output.find("had already ended: killed"), std::string::npos) << again_output;
}

TEST(FlotillaSweep, DryRunListsTheGridAndItsRefusalsAndStoresNothing) {
  Flotilla f;
  const auto file = f.dir().write("grid.yaml", R"(
name: grid
base: {model: small_cnn, dataset: synthetic, max_steps: 1}
axes:
  strategy: [ddp, pipeline]
  ranks_per_node: [1, 2]
)");
  const auto [status, output] = f.run({"sweep", file.string(), "--dry-run"});
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(
      output.find("sweep grid: 4 run(s) (2 strategy x 2 ranks_per_node), 3 to run, 1 refused"),
      std::string::npos)
      << output;
  EXPECT_NE(output.find("point 3 (strategy pipeline, ranks_per_node 1):\n    strategy: "
                        "\"pipeline\" needs at least 2 stages per pipeline"),
            std::string::npos)
      << output;
  // `local` cannot be joined by another node: every point refused, nothing to run.
  const auto [nodes_status, nodes_output] =
      f.run({"sweep", file.string(), "--dry-run", "--nodes", "mars"});
  EXPECT_EQ(nodes_status, 2);
  EXPECT_NE(nodes_output.find("nodes: \"mars\" is not a known node"), std::string::npos)
      << nodes_output;
  EXPECT_NE(nodes_output.find("every point is refused; nothing to run"), std::string::npos)
      << nodes_output;
  const auto [list_status, list] = f.run({"sweeps"});
  EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), 1) << list;  // the header only
}

// Every grid point that will run is predicted before anything does, its
// repeats once with it, a refused one not at all, and each run keeps its
// point's prediction for compare.
TEST(FlotillaSweep, PredictsEachPointFirstAndKeepsItWithThePointsRun) {
  Flotilla f;
  setenv("FLOTILLA_PROFILE_DIR", (f.dir().path() / "profiles").c_str(), 1);
  const auto file = f.dir().write("predicted.yaml", R"(
name: predicted
base:
  model: small_cnn
  dataset: synthetic
  synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 32}
  threads: 1
  max_steps: 2
axes:
  batch_size: [8, 32]
  strategy: [ddp, pipeline]
repeat: 2
)");
  const auto [dry_status, dry] = f.run({"sweep", file.string(), "--dry-run", "--predict"}, 300s);
  ASSERT_EQ(dry_status, 0) << dry;
  for (const char* point : {"(batch_size 8, strategy ddp): predicted step ",
                            "(batch_size 32, strategy ddp): predicted step "})
    EXPECT_NE(dry.find(point), std::string::npos) << point << "\n" << dry;
  EXPECT_EQ(dry.find("strategy pipeline): predicted"), std::string::npos)
      << dry;  // refused: one rank cannot be a pipeline
  size_t predicted = 0;
  for (auto at = dry.find("predicted step"); at != std::string::npos;
       at = dry.find("predicted step", at + 1))
    ++predicted;
  EXPECT_EQ(predicted, 2u) << dry;  // two grid points, each with two repeats
  EXPECT_TRUE(points_of(f, "predicted").empty()) << "a dry run stored its points";

  const auto [status, output] = f.run({"sweep", file.string(), "--predict"}, 600s);
  ASSERT_EQ(status, 0) << output;
  const auto points = points_of(f, "predicted");
  ASSERT_EQ(points.size(), 8u);
  const auto store = f.store();
  int predicted_runs = 0;
  for (const auto& point : points) {
    if (point.state == PointState::refused) continue;
    ASSERT_EQ(point.state, PointState::finished) << point.index;
    const auto prediction = controller::run_prediction(store, point.run_id);
    ASSERT_TRUE(prediction) << "point " << point.index + 1 << "'s run kept no prediction";
    EXPECT_GT(prediction->samples_per_s, 0);
    EXPECT_EQ(prediction->samples_per_step, json::parse(point.values_json)["batch_size"]);
    ++predicted_runs;
  }
  EXPECT_EQ(predicted_runs, 4);

  // Its report puts each prediction and its error beside what was measured.
  const auto report_dir = f.dir().path() / "report";
  const auto [report_status, report] =
      f.run({"study", "report", "predicted", "-o", report_dir.string()}, 120s);
  ASSERT_EQ(report_status, 0) << report;
  const auto markdown = read_text(report_dir / "report.md");
  for (const char* beside : {"| samples/s | samples/s predicted | prediction error % |",
                             "| peak mem MiB | peak mem MiB predicted | peak mem error % |"})
    EXPECT_NE(markdown.find(beside), std::string::npos) << beside << "\n" << markdown;
  const auto csv = read_text(report_dir / "study.csv");
  EXPECT_NE(csv.find("samples/s,samples/s predicted,prediction error %"), std::string::npos) << csv;
}

TEST(FlotillaSweep, RefusesBadInputBeforeAnythingStartsNamingTheKey) {
  Flotilla f;
  std::string big = "name: big\nbase: {model: small_cnn, dataset: synthetic}\naxes:\n";
  for (const char* key : {"batch_size", "epochs", "max_steps"})
    big += std::string("  ") + key + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n";
  const auto big_file = f.dir().write("big.yaml", big);
  const auto [big_status, big_output] = f.run({"sweep", big_file.string(), "--dry-run"});
  EXPECT_EQ(big_status, 2);
  EXPECT_NE(big_output.find("axes: the grid is 1331 runs (11 batch_size x 11 epochs x 11 "
                            "max_steps), more than 1000; pass --yes to queue them all"),
            std::string::npos)
      << big_output;
  const auto [yes_status, yes_output] = f.run({"sweep", big_file.string(), "--dry-run", "--yes"});
  EXPECT_EQ(yes_status, 0) << yes_output.substr(0, 2000);

  const auto bad = f.dir().write(
      "bad.yaml", "name: bad\nbase: {model: small_cnn}\naxes:\n  batchsize: [8]\n  epochs: []\n");
  const auto [bad_status, bad_output] = f.run({"sweep", bad.string()});
  EXPECT_EQ(bad_status, 2);
  EXPECT_NE(bad_output.find("axes.batchsize: \"batchsize\" is not a config key"), std::string::npos)
      << bad_output;
  EXPECT_NE(bad_output.find("axes.epochs: an empty axis"), std::string::npos) << bad_output;

  const auto named =
      f.dir().write("named.yaml", "name: named\nbase: nowhere\naxes: {batch_size: [8]}\n");
  const auto [named_status, named_output] = f.run({"sweep", named.string()});
  EXPECT_EQ(named_status, 2);
  EXPECT_NE(named_output.find("base: no stored experiment \"nowhere\""), std::string::npos)
      << named_output;
  const auto [list_status, list] = f.run({"sweeps"});
  EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), 1) << list;
}

}  // namespace
}  // namespace flotilla::testing
