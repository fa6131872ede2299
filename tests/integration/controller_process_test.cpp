// The `flotilla` CLI as a real process: controller, agent and training ranks
// on the local node, with the database read back afterwards.
#include <filesystem>
#include <fstream>
#include <map>

#include "cli_fixture.h"
#include "local_sshd.h"
#include "tiny_vit.h"

namespace flotilla::testing {
namespace {

using controller::RecordRow;
using controller::RunState;
using controller::Store;
using nlohmann::json;

// Qt sets the process locale from the environment; under a comma-decimal one
// the CLI must still read `lr: 0.05` and print every number with a point.
// The nodes are typed as a person types them, with spaces.
TEST(FlotillaCli, RunsUnderACommaDecimalLocaleAndPrintsNumbersWithAPoint) {
  if (!locale_installed("de_DE.UTF-8"))
    GTEST_SKIP() << "the de_DE.UTF-8 locale is not installed (scripts/setup.sh generates it)";
  Flotilla f;
  const std::vector<std::string> german{"LC_ALL=de_DE.UTF-8", "LANG=de_DE.UTF-8"};
  // The preset's optimizer has lr 0.05 and weight_decay 0.0005.
  const auto file =
      f.dir().write("exp.yaml", two_ranks("komma", "epochs: 1\nmax_steps: 12\ndropout: 0.1\n"));
  const auto [status, output] = f.run({"run", file.string(), "--nodes", " local "}, 300s, german);
  ASSERT_EQ(status, 0) << output;
  EXPECT_EQ(output.find("expected a number"), std::string::npos) << output;
  const std::string throughput = value_after(output, "throughput");
  EXPECT_TRUE(std::regex_search(throughput, std::regex("^[0-9]+\\.[0-9] samples/s"))) << throughput;

  auto store = f.store();
  const auto run = store.runs().at(0);
  EXPECT_EQ(run.nodes, std::vector<std::string>{"local"});
  EXPECT_DOUBLE_EQ(json::parse(run.config_json)["optimizer"]["lr"].get<double>(), 0.05);
  const auto [csv_status, csv] = f.run({"show", run.id, "--format", "csv"}, 60s, german);
  ASSERT_EQ(csv_status, 0) << csv;
  std::istringstream lines(csv);
  std::string header;
  std::getline(lines, header);
  const auto columns = std::count(header.begin(), header.end(), ',');
  int rows = 0;
  for (std::string line; std::getline(lines, line); ++rows)
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), columns) << line;  // no "0,05"
  EXPECT_EQ(rows, 24);
}

TEST(FlotillaCli, RunsTwoRanksOnFashionMnistAndStoresEveryRecord) {
  Flotilla f;
  const auto file = f.dir().write("exp.yaml", two_ranks("e2e", "epochs: 1\nmax_steps: 60\n"));
  const auto [status, output] = f.run({"run", file.string(), "--nodes", "local"});
  ASSERT_EQ(status, 0) << output;
  std::smatch id;
  ASSERT_TRUE(std::regex_search(output, id, std::regex("run ([0-9]{8}-[0-9]{6}-[0-9a-f]{4}):")))
      << output;
  const std::string run = id[1];

  auto store = f.store();
  const auto row = store.run(run);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, RunState::finished);
  EXPECT_EQ(row->world_size, 2);
  ASSERT_TRUE(row->running_ms && row->ended_ms);
  expect_complete(f, run);
  const auto records = store.records(run);
  for (int64_t rank : {0, 1}) {
    const auto steps = bodies_of(records, "step", rank);
    ASSERT_EQ(steps.size(), 60u) << "rank " << rank;
    for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i]["step"], i + 1);
    EXPECT_EQ(bodies_of(records, "end", rank).size(), 1u);
  }
  EXPECT_FALSE(bodies_of(records, "system", -1).empty());  // the agent's own records

  // The printed summary is the database's.
  const auto epoch = bodies_of(records, "epoch", 0).at(0);
  char accuracy[32];
  std::snprintf(accuracy, sizeof accuracy, "%.2f %%", 100 * epoch["acc_test"].get<double>());
  EXPECT_EQ(value_after(output, "test accuracy"), accuracy);
  EXPECT_EQ(value_after(output, "records"),
            std::to_string(records.size()) + " (seq 1.." + std::to_string(records.size()) + ")");
  EXPECT_EQ(value_after(output, "steps / epochs"), "60 / 1");
  EXPECT_GT(epoch["acc_test"].get<double>(), 0.5);  // it learned: chance is 0.1

  const auto [show_status, show] = f.run({"show", run, "--format", "json"});
  ASSERT_EQ(show_status, 0) << show;
  const auto shown = json::parse(show);
  EXPECT_EQ(shown["run"]["state"], "finished");
  EXPECT_EQ(shown["summary"]["records"], records.size());
  EXPECT_EQ(shown["summary"]["acc_test"], epoch["acc_test"]);
  const auto [csv_status, csv] = f.run({"show", run, "--format", "csv"});
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 120);  // header, 60 steps × 2 ranks
  const auto [runs_status, runs] = f.run({"runs"});
  EXPECT_NE(runs.find(run), std::string::npos);
  EXPECT_NE(runs.find("finished"), std::string::npos);
}

TEST(FlotillaCli, KillsARunSoThatNoRankIsLeft) {
  Flotilla f;
  auto [runner, run] = f.run_in_background(two_ranks("to-kill", "epochs: 50\n"), 10);
  ASSERT_FALSE(run.empty());
  ASSERT_EQ(ranks_alive(run).size(), 2u);

  const auto killed_at = std::chrono::steady_clock::now();
  auto killer = f.start({"kill", run, "--grace", "3"}, "kill.txt");
  std::vector<pid_t> left;
  do {
    left = ranks_alive(run);
    if (left.empty()) break;
    std::this_thread::sleep_for(50ms);
  } while (std::chrono::steady_clock::now() - killed_at < 10s);
  EXPECT_TRUE(left.empty()) << left.size() << " rank(s) of " << run << " alive 10 s after kill";
  ASSERT_EQ(killer->wait(30s), 0) << killer->output();
  EXPECT_NE(killer->output().find("run " + run + " killed"), std::string::npos) << killer->output();
  EXPECT_EQ(runner->wait(30s), 4) << runner->output();  // the runner saw the end too
  EXPECT_EQ(f.store().run(run)->state, RunState::killed);
  expect_complete(f, run);
  // A second kill finds it over.
  const auto [again, again_output] = f.run({"kill", run});
  EXPECT_EQ(again, 0);
  EXPECT_NE(again_output.find("had already ended: killed"), std::string::npos) << again_output;
}

TEST(FlotillaCli, ReattachesAfterTheControllerIsKilledAndStoresEveryRecordOnce) {
  Flotilla f;
  auto [runner, run] =
      f.run_in_background(two_ranks("reattach", "epochs: 1\nmax_steps: 150\n"), 20);
  ASSERT_FALSE(run.empty());
  runner->kill(SIGKILL);
  ASSERT_TRUE(runner->wait(10s));
  const auto stored_at_kill = f.store().records(run).size();
  std::this_thread::sleep_for(2s);  // the run goes on without a controller
  ASSERT_EQ(f.store().run(run)->state, RunState::running);
  EXPECT_EQ(f.store().records(run).size(), stored_at_kill);

  const auto [status, output] = f.run({"attach"});
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("attached to " + run), std::string::npos) << output;
  EXPECT_EQ(f.store().run(run)->state, RunState::finished);
  expect_complete(f, run);
  const auto records = f.store().records(run);
  EXPECT_GT(records.size(), stored_at_kill);
  EXPECT_EQ(bodies_of(records, "step", 0).size(), 150u);
  EXPECT_EQ(bodies_of(records, "step", 1).size(), 150u);
}

TEST(FlotillaCli, ARankThatThrowsFailsTheRunAndStopsTheOther) {
  Flotilla f;
  const auto file = f.dir().write("exp.yaml", two_ranks("faulty", "epochs: 1\n"));
  auto child = f.start({"run", file.string()}, "run.txt", {"FLOTILLA_FAULT=1:3"});
  ASSERT_EQ(child->wait(120s), 1) << child->output();
  auto store = f.store();
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, RunState::failed);
  EXPECT_NE(runs[0].reason.find("rank 1: injected fault at step 3 on rank 1"), std::string::npos)
      << runs[0].reason;
  EXPECT_TRUE(ranks_alive(runs[0].id).empty());
  expect_complete(f, runs[0].id);
}

// An elastic pipeline (2 pipelines x 2 stages becoming 4 replicas at step 6)
// whose rank 2 is SIGKILLed in the middle of the change: the run fails with
// words that name the transition, and no rank is left waiting.
TEST(FlotillaCli, ARankLostInAnElasticTransitionFailsTheRunNamingTheTransition) {
  Flotilla f;
  const auto file = f.dir().write(
      "exp.yaml",
      tiny_vit_pipeline_ddp("name: elastic-lost-rank\nelastic: {pipe: true, dp: true}\n"));
  auto child = f.start({"run", file.string()}, "run.txt", {"FLOTILLA_FAULT=2:transition"});
  ASSERT_EQ(child->wait(60s), 1) << child->output();
  const auto runs = f.store().runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, RunState::failed);
  EXPECT_NE(runs[0].reason.find("elastic transition before step 6 from 2x2 [3+3] to 1x4 [6]"),
            std::string::npos)
      << runs[0].reason;
  EXPECT_TRUE(ranks_alive(runs[0].id).empty());
  expect_complete(f, runs[0].id);
}

// A run cut by a rank's failure after its checkpoints of steps 4 and 8 goes
// on with `flotilla resume`: a new attempt of the same run from step 9 to its
// end, the records of both attempts stored once each, in order.
TEST(FlotillaCli, ResumesAFailedRunFromItsNewestCheckpoint) {
  Flotilla f;
  const auto file = f.dir().write(
      "exp.yaml",
      two_ranks("resumable", "epochs: 1\nmax_steps: 20\nsave: {every_steps: 4, keep: 2}\n"));
  auto child = f.start({"run", file.string()}, "run.txt", {"FLOTILLA_FAULT=1:11"});
  ASSERT_EQ(child->wait(120s), 1) << child->output();
  const std::string run = f.store().runs().at(0).id;
  ASSERT_EQ(f.store().run(run)->state, RunState::failed);

  const auto [status, output] = f.run({"resume", run});
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("run " + run + ": attempt 2"), std::string::npos) << output;
  auto store = f.store();
  EXPECT_EQ(store.run(run)->state, RunState::finished);
  EXPECT_EQ(store.attempts(run), 2);
  EXPECT_TRUE(ranks_alive(run).empty());
  expect_complete(f, run);
  const auto records = store.records(run);
  for (int64_t rank = 0; rank < 2; ++rank) {
    const auto starts = bodies_of(records, "start", rank);
    ASSERT_EQ(starts.size(), 2u) << rank;
    EXPECT_FALSE(starts[0].contains("resumed_from_step"));
    EXPECT_EQ(starts[1].value("resumed_from_step", int64_t{0}), 8) << rank;
    // Steps 1..9 or 1..10 of the first attempt (a step's record goes out
    // once the next step has ended; step 11 failed on rank 1 after its
    // all-reduce, which rank 0 may have finished), then 9..20 of the second;
    // a step trained again after the checkpoint loses exactly what it lost.
    std::vector<int64_t> steps;
    std::map<int64_t, std::vector<double>> losses;
    for (const auto& step : bodies_of(records, "step", rank)) {
      steps.push_back(step["step"].get<int64_t>());
      losses[step["step"].get<int64_t>()].push_back(step["loss"].get<double>());
    }
    const int64_t first_attempt = steps.size() == 22 ? 10 : 9;
    std::vector<int64_t> expected;
    for (int64_t s = 1; s <= first_attempt; ++s) expected.push_back(s);
    for (int64_t s = 9; s <= 20; ++s) expected.push_back(s);
    EXPECT_EQ(steps, expected) << rank;
    for (int64_t again = 9; again <= first_attempt; ++again) {
      ASSERT_EQ(losses[again].size(), 2u);
      EXPECT_EQ(losses[again][0], losses[again][1]) << "step " << again << " of rank " << rank;
    }
  }

  // Finished: nothing left to resume, and nothing is started.
  const auto [again_status, again] = f.run({"resume", run});
  EXPECT_EQ(again_status, 2);
  EXPECT_NE(again.find("finished: there is nothing to resume"), std::string::npos) << again;
  EXPECT_EQ(f.store().attempts(run), 2);
}

// A run that saved nothing cannot go on from anywhere: the resume is refused
// naming `save`, and the run stays as it ended.
TEST(FlotillaCli, RefusesToResumeARunThatSavedNoCheckpoints) {
  Flotilla f;
  const auto file = f.dir().write("exp.yaml", two_ranks("unsaved", "epochs: 1\nmax_steps: 6\n"));
  auto child = f.start({"run", file.string()}, "run.txt", {"FLOTILLA_FAULT=1:3"});
  ASSERT_EQ(child->wait(120s), 1) << child->output();
  const std::string run = f.store().runs().at(0).id;
  const auto [status, output] = f.run({"resume", run});
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("save: run " + run + " saved no checkpoints"), std::string::npos) << output;
  EXPECT_EQ(f.store().run(run)->state, RunState::failed);
  EXPECT_EQ(f.store().attempts(run), 1);
}

TEST(FlotillaCli, RefusesABadExperimentNamingTheFieldAndStoresNoRun) {
  Flotilla f;
  const auto file =
      f.dir().write("bad.yaml", preset_with("\nbatch_size: 0\nnodes: [local, mars]\n"));
  const auto [status, output] = f.run({"run", file.string()});
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("batch_size"), std::string::npos) << output;
  const auto [ok, runs] = f.run({"runs"});
  EXPECT_EQ(std::count(runs.begin(), runs.end(), '\n'), 1) << runs;  // the header only

  const auto good = f.dir().write("good.yaml", preset_with("\nname: imported\n"));
  const auto [unknown_status, unknown] = f.run({"run", good.string(), "--nodes", "mars"});
  EXPECT_EQ(unknown_status, 2);
  EXPECT_NE(unknown.find("nodes: \"mars\" is not a known node"), std::string::npos) << unknown;
}

// `flotilla plan --predict`: the step predicted on this machine's block
// times, its all-reduce counted once the nodes' links are benched, and said
// not counted before.
TEST(FlotillaCli, PlanPredictsTheStepOnTheNodesNewestLinkBench) {
  Flotilla f;
  // Block profiles of this test's own: the first prediction times the blocks.
  const auto profiles = f.dir().path() / "profiles";
  setenv("FLOTILLA_PROFILE_DIR", profiles.c_str(), 1);
  const auto file = f.dir().write("ddp.yaml", R"(name: predicted
model: small_cnn
dataset: synthetic
synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 32}
strategy: ddp
ranks_per_node: 2
batch_size: 16
threads: 1
max_steps: 12
)");
  const auto [alone_status, alone] = f.run({"plan", file.string(), "--predict"});
  ASSERT_EQ(alone_status, 0) << alone;
  EXPECT_NE(alone.find("no link bench of local stored"), std::string::npos) << alone;
  EXPECT_NE(alone.find("predicted step"), std::string::npos) << alone;
  EXPECT_NE(alone.find("links: none measured"), std::string::npos) << alone;
  EXPECT_NE(alone.find("blocks timed here on 16 samples"), std::string::npos) << alone;
  // Its two ranks share this machine: how much they slow each other was
  // timed as two one-rank trainings of the engine at once, and kept.
  EXPECT_NE(alone.find("2 ranks share one machine's cores"), std::string::npos) << alone;
  EXPECT_NE(alone.find("one-rank trainings at once on this machine"), std::string::npos) << alone;
  ASSERT_TRUE(std::filesystem::is_directory(profiles));
  int kept_profiles = 0;
  for (const auto& entry : std::filesystem::directory_iterator(profiles)) {
    const auto kept = json::parse(std::ifstream(entry.path()));
    EXPECT_EQ(kept.at("core_sharing_by"), "processes") << kept.dump();
    ASSERT_EQ(kept.at("core_sharing").size(), 2u) << kept.dump();
    EXPECT_EQ(kept["core_sharing"][0].get<double>(), 1.0);
    EXPECT_GT(kept["core_sharing"][1].get<double>(), 0.0);
    ++kept_profiles;
  }
  EXPECT_EQ(kept_profiles, 1);

  const auto [bench_status, bench] =
      f.run({"nodes", "bench", "local", "--ranks-per-node", "2", "--max-bytes", "4194304",
             "--iterations", "3", "--warmup", "1"});
  ASSERT_EQ(bench_status, 0) << bench;
  const auto [status, output] = f.run({"plan", file.string(), "--predict", "--json"});
  ASSERT_EQ(status, 0) << output;
  const auto plan = json::parse(output.substr(output.find('{')));
  const auto& predicted = plan.at("prediction");
  EXPECT_NE(
      predicted.at("links").get<std::string>().find("flotilla nodes bench over local (2 ranks"),
      std::string::npos)
      << predicted.dump();
  EXPECT_GT(predicted.at("stages").at(0).at("allreduce_ms").get<double>(), 0.0);
  EXPECT_EQ(predicted.at("samples_per_step").get<int64_t>(), 32);
  EXPECT_EQ(predicted.at("block_costs").at("source").get<std::string>(), "profile");

  // Kept with a run it started, and set against what the run measured.
  const auto [run_status, ran] = f.run({"run", file.string(), "--predict"});
  ASSERT_EQ(run_status, 0) << ran;
  EXPECT_NE(ran.find("predicted step"), std::string::npos) << ran;
  const auto run_at = ran.find("\nrun ") + 5;  // after the prediction's line
  const auto run_id = ran.substr(run_at, ran.find(':', run_at) - run_at);
  const auto [compare_status, compared] =
      f.run({"compare", run_id, "--columns",
             "run,throughput,predicted_throughput,prediction_err_pct", "--format", "json"});
  ASSERT_EQ(compare_status, 0) << compared;
  const auto table = json::parse(compared.substr(compared.find('{')));
  const auto& values = table.at("rows").at(0).at("values");
  const double measured = values.at("throughput").get<double>();
  const double kept = values.at("predicted_throughput").get<double>();
  // The prediction kept is the one `run` printed before it started.
  const auto said = ran.find(" samples/s", ran.find("predicted step"));
  ASSERT_NE(said, std::string::npos) << ran;
  const auto number_at = ran.rfind("= ", said) + 2;
  EXPECT_NEAR(std::stod(ran.substr(number_at, said - number_at)), kept, 0.05) << ran;
  EXPECT_NEAR(values.at("prediction_err_pct").get<double>(), 100 * (kept - measured) / measured,
              1e-9);

  const auto bad = f.dir().write("bad.yaml", "strategy: ddp\nbatch_size: 0\n");
  const auto [bad_status, refused] = f.run({"plan", bad.string(), "--predict"});
  EXPECT_EQ(bad_status, 2);
  EXPECT_NE(refused.find("batch_size"), std::string::npos) << refused;
  unsetenv("FLOTILLA_PROFILE_DIR");
}

TEST(FlotillaCli, ImportsListsAndExportsExperiments) {
  Flotilla f;
  const auto a = f.dir().write("a.yaml", preset_with("\nname: alpha\nbatch_size: 32\n"));
  const auto bad = f.dir().write("bad.yaml", "model: resnet1000\n");
  const auto [status, output] = f.run({"experiments", "import", a.string(), bad.string()});
  EXPECT_EQ(status, 2);  // one file was bad; the good one is stored anyway
  EXPECT_NE(output.find("imported alpha"), std::string::npos) << output;
  EXPECT_NE(output.find("model"), std::string::npos) << output;
  const auto [list_status, list] = f.run({"experiments", "list"});
  EXPECT_NE(list.find("alpha"), std::string::npos) << list;
  const auto out = f.dir().path() / "alpha-out.yaml";
  EXPECT_EQ(f.run({"experiments", "export", "alpha", "-o", out.string()}).first, 0);
  std::ifstream in(out);
  std::string exported((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(exported.find("batch_size: 32"), std::string::npos) << exported;
  const auto [missing_status, missing] = f.run({"experiments", "export", "beta"});
  EXPECT_EQ(missing_status, 2);
  EXPECT_NE(missing.find("no experiment \"beta\""), std::string::npos) << missing;
}

TEST(FlotillaCli, PipelineStagesFreezeAndReportTheirShareOfTheStep) {
  Flotilla f;
  const auto file = f.dir().write(
      "pipe.yaml", preset_with("\nname: pipe\nstrategy: pipeline\nschedule: 1f1b\n"
                               "ranks_per_node: 2\nchunks: 4\nthreads: 1\nepochs: 1\n"
                               "max_steps: 30\nbalance: [2, 2]\n"
                               "freeze: {method: fixed, schedule: [{at_step: 16, blocks: 2}]}\n"));
  const auto [status, output] = f.run({"run", file.string()});
  ASSERT_EQ(status, 0) << output;
  const auto run = run_id_in(output);
  expect_complete(f, run);
  const auto records = f.store().records(run);
  const auto first = bodies_of(records, "step", 0), last = bodies_of(records, "step", 1);
  ASSERT_EQ(first.size(), 30u);
  ASSERT_EQ(last.size(), 30u);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(first[i]["stage"], 0);
    EXPECT_EQ(last[i]["stage"], 1);
    // Only the last stage computes the loss.
    EXPECT_FALSE(first[i].contains("loss"));
    EXPECT_TRUE(last[i].contains("loss"));
    const bool frozen = i + 1 >= 16;
    EXPECT_EQ(first[i]["frozen_blocks"], frozen ? 2 : 0);
    // Activations always flow forward; once the first stage is frozen, no
    // gradient flows back to it.
    EXPECT_GT(first[i]["bytes_sent"].get<int64_t>(), 0);
    EXPECT_EQ(last[i]["bytes_sent"].get<int64_t>() == 0, frozen) << "step " << i + 1;
    for (const auto& s : {first[i], last[i]})
      EXPECT_NEAR(s["busy_ms"].get<double>(),
                  s["forward_ms"].get<double>() + s["backward_ms"].get<double>(), 1e-6);
  }
  // The summary speaks with the loss of the stage that has it.
  EXPECT_NE(value_after(output, "final loss"), "0.0000") << output;
}

TEST(FlotillaCli, FreezingDropsDdpBytesByExactlyTheFrozenBlocksGradients) {
  Flotilla f;
  const auto file = f.dir().write(
      "freeze.yaml", two_ranks("freeze",
                               "epochs: 1\nmax_steps: 12\n"
                               "freeze: {method: fixed, schedule: [{at_step: 7, blocks: 2}]}\n"));
  const auto [status, output] = f.run({"run", file.string()});
  ASSERT_EQ(status, 0) << output;
  const auto records = f.store().records(run_id_in(output));
  const auto start = bodies_of(records, "start", 0).at(0);
  const auto blocks = start["block_parameters"].get<std::vector<int64_t>>();
  ASSERT_GE(blocks.size(), 3u);
  const int64_t all = start["trainable_parameters"];
  for (int64_t rank : {0, 1}) {
    const auto steps = bodies_of(records, "step", rank);
    ASSERT_EQ(steps.size(), 12u);
    for (int i = 0; i < 12; ++i) {
      const int64_t expected = 4 * (i + 1 >= 7 ? all - blocks[0] - blocks[1] : all);
      EXPECT_EQ(steps[i]["bytes_sent"].get<int64_t>(), expected)
          << "rank " << rank << " step " << i + 1;
    }
  }
}

// The CLI's confirmation of a host key is the fingerprint itself: an unknown
// key is refused naming how to trust exactly it, a --trust-host-key
// fingerprint the node does not present is refused naming both and records
// nothing, and the one it presents is trusted. Against an sshd on 127.0.0.1
// of this test's own; the node's agent is this build's flotilla-agent.
TEST(FlotillaCli, TrustHostKeyTrustsOnlyTheFingerprintGiven) {
  std::string why;
  if (!LocalSshd::available(&why)) GTEST_SKIP() << why;
  Flotilla f;
  LocalSshd sshd(f.dir().path());
  ASSERT_TRUE(sshd.start(1)) << sshd.log();
  const auto presented = sshd.fingerprint(1), other = sshd.fingerprint(2);
  const auto agent = std::filesystem::path(FLOTILLA_CLI_BINARY).parent_path() / "flotilla-agent";
  const auto known_hosts = (f.dir().path() / "known_hosts").string();
  ASSERT_EQ(
      f.run({"nodes", "add", "keyed", "--host", "127.0.0.1", "--port", std::to_string(sshd.port()),
             "--user", LocalSshd::login(), "--key", sshd.client_key(), "--remote-dir",
             (f.dir().path() / "remote").string(), "--agent-path", agent.string()})
          .first,
      0);
  const auto probe = [&](const std::vector<std::string>& trust) {
    std::vector<std::string> args{"--known-hosts", known_hosts};
    args.insert(args.end(), trust.begin(), trust.end());
    args.insert(args.end(), {"nodes", "probe", "keyed"});
    return f.run(args, 120s);
  };

  const auto [unknown, unknown_out] = probe({});
  EXPECT_NE(unknown, 0) << unknown_out;
  EXPECT_NE(unknown_out.find("--trust-host-key NODE=" + presented), std::string::npos)
      << unknown_out;

  const auto [refused, refused_out] = probe({"--trust-host-key", "keyed=" + other});
  EXPECT_NE(refused, 0) << refused_out;
  EXPECT_NE(refused_out.find(presented), std::string::npos) << refused_out;
  EXPECT_NE(refused_out.find(other), std::string::npos) << refused_out;
  EXPECT_FALSE(std::filesystem::exists(known_hosts) && std::filesystem::file_size(known_hosts) > 0)
      << "a key was recorded";

  const auto [bad, bad_out] = probe({"--trust-host-key", presented});
  EXPECT_EQ(bad, 2) << bad_out;
  EXPECT_NE(bad_out.find("is not NODE=SHA256:"), std::string::npos) << bad_out;

  const auto [trusted, trusted_out] = probe({"--trust-host-key", "keyed=" + presented});
  EXPECT_EQ(trusted, 0) << trusted_out;
  EXPECT_GT(std::filesystem::file_size(known_hosts), 0u);
}

}  // namespace
}  // namespace flotilla::testing
