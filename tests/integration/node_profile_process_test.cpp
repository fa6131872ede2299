// `flotilla nodes profile`: a run's blocks timed on a node by the node's own
// engine, kept in the store, and used by the predictions of runs there.
#include "cli_fixture.h"

namespace flotilla::testing {
namespace {

using nlohmann::json;

// A two-stage pipeline of two ranks on the local node; `batch_size` samples
// a step in 2 micro-batches.
std::string pipeline(int batch_size) {
  return R"(name: profiled
model: small_cnn
dataset: synthetic
synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 32}
strategy: pipeline
chunks: 2
ranks_per_node: 2
threads: 1
max_steps: 4
batch_size: )" +
         std::to_string(batch_size) + "\n";
}

json plan_of(const std::string& output) {
  return json::parse(output.substr(output.find('{')));
}

TEST(FlotillaNodesProfile, TimesARunsBlocksOnTheNodeAndPredictionsThereUseThem) {
  Flotilla f;
  setenv("FLOTILLA_PROFILE_DIR", (f.dir().path() / "profiles").c_str(), 1);
  const auto file = f.dir().write("pipe.yaml", pipeline(16));

  const auto [before_status, before] = f.run({"plan", file.string(), "--predict"});
  ASSERT_EQ(before_status, 0) << before;
  EXPECT_NE(before.find("no block profile of local stored"), std::string::npos) << before;
  EXPECT_NE(before.find("blocks timed here"), std::string::npos) << before;

  const auto [status, profiled] = f.run({"nodes", "profile", "local", file.string()});
  ASSERT_EQ(status, 0) << profiled;
  EXPECT_NE(profiled.find("at micro-batch 8 on local"), std::string::npos) << profiled;
  EXPECT_NE(profiled.find("micro-batch 8, 1 thread(s)"), std::string::npos) << profiled;
  const auto [show_status, shown] = f.run({"nodes", "profile", "local", "--show"});
  ASSERT_EQ(show_status, 0) << shown;
  EXPECT_NE(shown.find("micro-batch 8, 1 thread(s)"), std::string::npos) << shown;

  // The record the node sent: its blocks' times are the prediction's.
  auto store = f.store();
  json record;
  for (const auto& run : store.runs())
    for (const auto& r : store.records(run.id, {"profile", std::nullopt, std::nullopt}))
      record = json::parse(r.body);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record.at("micro_batch"), 8);
  EXPECT_EQ(record.at("threads"), 1);
  // Two ranks on the node, as the run will have: how they slow each other
  // was timed there too.
  EXPECT_EQ(record.at("profile").at("core_sharing").size(), 2u) << record.dump();

  const auto [after_status, after] = f.run({"plan", file.string(), "--predict", "--json"});
  ASSERT_EQ(after_status, 0) << after;
  const auto plan = plan_of(after);
  const auto& prediction = plan.at("prediction");
  EXPECT_EQ(prediction.at("block_costs").at("source"), "node_profile") << prediction.dump();
  EXPECT_EQ(prediction.at("block_costs").at("node"), "local");
  EXPECT_EQ(prediction.at("block_costs").at("measured_ms"), record.at("profile").at("measured_ms"));
  const auto& blocks = record.at("profile").at("blocks");
  for (const auto& stage : plan.at("stage_plans")) {
    double forward = 0;
    const int first = stage.at("first_block"), count = stage.at("blocks");
    for (int b = first; b < first + count; ++b)
      forward += blocks.at(b).at("forward_ms").get<double>();
    EXPECT_NEAR(prediction.at("stages").at(stage.at("stage").get<int>()).at("forward_ms"), forward,
                1e-9)
        << "stage " << stage.at("stage");
  }
  const auto [said_status, said] = f.run({"plan", file.string(), "--predict"});
  EXPECT_NE(said.find("blocks from node local's profile of"), std::string::npos) << said;

  // Another micro-batch is not what the node timed: timed here, and said.
  const auto larger = f.dir().write("larger.yaml", pipeline(32));
  const auto [other_status, other] = f.run({"plan", larger.string(), "--predict", "--json"});
  ASSERT_EQ(other_status, 0) << other;
  const auto other_plan = plan_of(other);
  const auto& not_profiled = other_plan.at("prediction");
  EXPECT_NE(not_profiled.at("block_costs").at("source"), "node_profile");
  EXPECT_NE(not_profiled.at("notes").dump().find(
                "no profile of node local for this model at micro-batch 16"),
            std::string::npos)
      << not_profiled.dump();

  const auto [unknown_status, unknown] = f.run({"nodes", "profile", "mars", file.string()});
  EXPECT_EQ(unknown_status, 2);
  EXPECT_NE(unknown.find("no node \"mars\""), std::string::npos) << unknown;
  const auto [added, add_output] =
      f.run({"nodes", "add", "hpc", "--slurm", "--host", "login.example"});
  ASSERT_EQ(added, 0) << add_output;
  const auto [login_status, login] = f.run({"nodes", "profile", "hpc", file.string()});
  EXPECT_EQ(login_status, 2);
  EXPECT_NE(login.find("node hpc is a SLURM cluster's login node"), std::string::npos) << login;
  unsetenv("FLOTILLA_PROFILE_DIR");
}

}  // namespace
}  // namespace flotilla::testing
