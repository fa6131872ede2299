// The designer's plan preview against the engine: the same experiment typed
// into the designer and handed to `flotilla-train --plan` directly must give
// the same blocks per stage, the same all-reduce bytes per step and the same
// boundary bytes, fp32 and after the codec; and the preview shows them.
#include <gtest/gtest.h>

#include <QDateTime>
#include <QProcess>
#include <QTest>
#include <nlohmann/json.hpp>

#include <fstream>

#include "experiment_designer.h"
#include "plan_preview.h"
#include "screenshot.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

struct PlanCase {
  const char* label;
  const char* yaml;
  std::vector<int64_t> balance;
  int64_t replicas;
  bool compressed;  // sort_quant at the boundaries, else fp32 on the wire
};
// Its label, for the test's name in ctest (not the struct's bytes).
void PrintTo(const PlanCase& c, std::ostream* out) {
  *out << c.label;
}

const PlanCase kCases[] = {
    {"Resnet18TwoStagesPipelineSortQuant",
     "name: plan-resnet18\nmodel: resnet18\ndataset: synthetic\nstrategy: pipeline\n"
     "ranks_per_node: 2\nbalance: [4, 6]\nchunks: 2\nbatch_size: 8\n"
     "compression: {method: sort_quant, bits: 6, split_bits: 2}\n",
     {4, 6},
     1,
     true},
    {"Resnet18TwoStagesPipelineDdpFp32",
     "name: plan-resnet18-ddp\nmodel: resnet18\ndataset: synthetic\nstrategy: pipeline_ddp\n"
     "ranks_per_node: 4\nreplicas: 2\nbalance: [4, 6]\nchunks: 2\nbatch_size: 8\n",
     {4, 6},
     2,
     false},
    {"TransformerFourStagesPipelineDdpSortQuant",
     "name: plan-transformer\nmodel: transformer_encoder\n"
     "transformer: {vocab: 1000, hidden: 64, layers: 4, heads: 4, ffn: 256, max_positions: 34}\n"
     "dataset: synthetic\nsynthetic: {shape: [32], vocab: 1000, classes: 2}\n"
     "strategy: pipeline_ddp\nranks_per_node: 8\nreplicas: 2\nbalance: [2, 1, 1, 2]\n"
     "chunks: 4\nbatch_size: 16\ncompression: {method: sort_quant, bits: 12, split_bits: 4}\n",
     {2, 1, 1, 2},
     2,
     true},
    {"TransformerFourStagesPipelineFp32",
     "name: plan-transformer-fp32\nmodel: transformer_encoder\n"
     "transformer: {vocab: 1000, hidden: 64, layers: 4, heads: 4, ffn: 256, max_positions: 34}\n"
     "dataset: synthetic\nsynthetic: {shape: [32], vocab: 1000, classes: 2}\n"
     "strategy: pipeline\nranks_per_node: 4\nbalance: [2, 1, 1, 2]\nchunks: 4\nbatch_size: 16\n",
     {2, 1, 1, 2},
     1,
     false},
};

// What flotilla-train --plan prints for `yaml`, run here as a person would run it.
json engine_plan(const std::string& yaml) {
  testing::TempDir dir;
  const auto file = dir.write("experiment.yaml", yaml);
  QProcess train;
  train.start(FLOTILLA_TRAIN_BINARY, {"--plan", "--config", QString::fromStdString(file.string())});
  EXPECT_TRUE(train.waitForFinished(120000));
  EXPECT_EQ(train.exitCode(), 0) << train.readAllStandardError().toStdString();
  return json::parse(train.readAllStandardOutput().toStdString());
}

// 524288 -> "524,288", as the preview groups digits.
QString grouped(int64_t n) {
  QString digits = QString::number(n);
  for (int i = int(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ',');
  return digits;
}

// `yaml` typed into the designer, its preview computed by flotilla-train
// --plan at once: whether it came to be shown (the failure says why not).
::testing::AssertionResult previewed(ExperimentDesigner& designer, const char* yaml) {
  PlanPreview* preview = designer.planPreview();
  preview->setProgram(FLOTILLA_TRAIN_BINARY);
  preview->setDelay(0);
  if (!designer.setConfigText(yaml)) return ::testing::AssertionFailure() << "not taken: " << yaml;
  if (!designer.problems().isEmpty())
    return ::testing::AssertionFailure() << designer.problems().join("; ").toStdString();
  wait_until(
      [&] {
        return preview->state() == PlanPreview::State::shown ||
               preview->state() == PlanPreview::State::failed ||
               preview->state() == PlanPreview::State::unavailable;
      },
      120s);
  if (preview->state() != PlanPreview::State::shown)
    return ::testing::AssertionFailure() << preview->statusText().toStdString();
  return ::testing::AssertionSuccess();
}

class PlanPreviewMatchesTheEngine : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlanPreviewMatchesTheEngine, BlocksPerStageAllReduceAndBoundaryBytes) {
  const PlanCase& c = GetParam();
  ExperimentDesigner designer;
  ASSERT_TRUE(previewed(designer, c.yaml));
  const PlanPreview* preview = designer.planPreview();
  const PlanNumbers& shown = preview->numbers();
  const QString text = preview->shownText();
  const json engine = engine_plan(c.yaml);

  // Blocks and their parameter counts.
  const auto& blocks = engine.at("blocks");
  ASSERT_EQ(shown.blocks.size(), int(blocks.size()));
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(shown.blocks[int(i)].parameters, blocks[i].at("parameters").get<int64_t>()) << i;
    EXPECT_EQ(shown.blocks[int(i)].trainable, blocks[i].at("trainable").get<int64_t>()) << i;
  }

  // Blocks per stage: as given, as the engine cuts them.
  EXPECT_EQ(std::vector<int64_t>(shown.balance.begin(), shown.balance.end()), c.balance);
  EXPECT_EQ(engine.at("balance").at("blocks_per_stage").get<std::vector<int64_t>>(), c.balance);
  EXPECT_EQ(shown.stages, int64_t(c.balance.size()));
  EXPECT_EQ(shown.replicas, c.replicas);
  EXPECT_EQ(shown.replicas, engine.at("replicas").get<int64_t>());

  // All-reduce bytes per step: the engine's, and 4 x the stage's trainable parameters.
  const auto& stages = engine.at("stage_plans");
  ASSERT_EQ(shown.stage_list.size(), int(stages.size()));
  for (size_t s = 0; s < stages.size(); ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const auto& mine = shown.stage_list[int(s)];
    EXPECT_EQ(mine.first_block, stages[s].at("first_block").get<int64_t>());
    EXPECT_EQ(mine.blocks, c.balance[s]);
    int64_t trainable = 0;
    for (int64_t b = mine.first_block; b < mine.first_block + mine.blocks; ++b)
      trainable += blocks[size_t(b)].at("trainable").get<int64_t>();
    EXPECT_EQ(mine.trainable, trainable);
    const auto& allreduce = stages[s].at("allreduce");
    if (c.replicas == 1) {
      EXPECT_TRUE(allreduce.is_null());
      EXPECT_EQ(mine.allreduce_ranks, 0);
    } else {
      EXPECT_EQ(mine.allreduce_ranks, allreduce.at("ranks").get<int64_t>());
      EXPECT_EQ(mine.allreduce_ranks, c.replicas);
      EXPECT_EQ(mine.allreduce_bytes, allreduce.at("bytes_per_step").get<int64_t>());
      EXPECT_EQ(mine.allreduce_bytes, 4 * trainable);
      EXPECT_TRUE(text.contains(grouped(mine.allreduce_bytes) + " B")) << text.toStdString();
    }
  }

  // Each boundary's activation bytes per micro-batch, fp32 and after the codec.
  const auto& boundaries = engine.at("boundaries");
  ASSERT_EQ(shown.boundaries.size(), int(c.balance.size()) - 1);
  ASSERT_EQ(shown.boundaries.size(), int(boundaries.size()));
  for (size_t b = 0; b < boundaries.size(); ++b) {
    SCOPED_TRACE("boundary " + std::to_string(b));
    const auto& mine = shown.boundaries[int(b)].activations;
    const auto& theirs = boundaries[b].at("activations");
    EXPECT_EQ(mine.fp32_bytes, theirs.at("fp32_bytes").get<int64_t>());
    EXPECT_EQ(mine.wire_bytes, theirs.at("wire_bytes").get<int64_t>());
    int64_t elements = 1;
    for (auto d : shown.boundaries[int(b)].shape) elements *= d;
    EXPECT_EQ(mine.fp32_bytes, 4 * elements);
    if (c.compressed)
      EXPECT_LT(mine.wire_bytes, mine.fp32_bytes);
    else
      EXPECT_EQ(mine.wire_bytes, mine.fp32_bytes);
    EXPECT_TRUE(text.contains(grouped(mine.fp32_bytes) + " B")) << text.toStdString();
    EXPECT_TRUE(text.contains(grouped(mine.wire_bytes) + " B")) << text.toStdString();
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, PlanPreviewMatchesTheEngine, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<PlanCase>& info) {
                           return std::string(info.param.label);
                         });

// An elastic pipeline's preview says which layouts it will go through, as
// the engine plans them by the trainer's own rule.
TEST(PlanPreview, ShowsTheLayoutsAnElasticPipelineGoesThrough) {
  const char* yaml =
      "name: plan-elastic\nmodel: vit\nvit: {patch: 4, depth: 4, dim: 32, heads: 4, mlp_dim: 64}\n"
      "dataset: synthetic\nsynthetic: {shape: [3, 16, 16], classes: 4}\nbatch_size: 16\n"
      "chunks: 2\nstrategy: pipeline_ddp\nranks_per_node: 4\nreplicas: 2\nbalance: [3, 3]\n"
      "freeze: {method: fixed, schedule: [{at_step: 6, blocks: 5}]}\n"
      "elastic: {pipe: true, dp: true}\n";
  ExperimentDesigner designer;
  ASSERT_TRUE(previewed(designer, yaml));
  const PlanPreview* preview = designer.planPreview();
  const auto& shown = preview->numbers();
  EXPECT_EQ(shown.elastic_costs, "estimated");
  ASSERT_EQ(shown.elastic.size(), 1);
  EXPECT_EQ(shown.elastic[0].at_step, 6);
  EXPECT_EQ(shown.elastic[0].replicas, 4);
  const QString text = preview->shownText();
  EXPECT_TRUE(text.contains("from step 6 (5 blocks frozen): 4 replicas × 1 stage [6]"))
      << text.toStdString();
  designer.resize(1200, 800);
  designer.show();
  save_screenshot(designer, "designer-elastic-plan");
}

// The prediction beside the counts: without a link bench of the nodes it
// says that communication is not counted; given one (as the controller
// worker reads them from the store), the step is predicted again on it and
// the preview names the bench and its age.
TEST(PlanPreview, PredictsTheStepOnTheNodesLinkBenchAndSaysWhenThereIsNone) {
  const char* yaml =
      "name: plan-predict\nmodel: small_cnn\ndataset: synthetic\n"
      "synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 32}\n"
      "strategy: ddp\nnodes: [gpu-a, gpu-b]\nbatch_size: 16\nthreads: 1\n";
  testing::TempDir profiles;  // this test's own: the first prediction times the blocks
  qputenv("FLOTILLA_PROFILE_DIR", QByteArray::fromStdString(profiles.path().string()));
  ExperimentDesigner designer;
  PlanPreview* preview = designer.planPreview();
  preview->setPredicting(true);
  ASSERT_TRUE(previewed(designer, yaml));
  EXPECT_FALSE(preview->numbers().prediction->from_profile);
  EXPECT_TRUE(preview->shownText().contains("blocks timed on this machine on 16 samples"))
      << preview->shownText().toStdString();
  ASSERT_TRUE(preview->numbers().prediction);
  EXPECT_TRUE(preview->numbers().prediction->links.isEmpty());
  EXPECT_TRUE(preview->shownText().contains("No link bench for gpu-a,gpu-b"))
      << preview->shownText().toStdString();
  // The fullest rank's peak memory beside the step, as the run will report it.
  const int64_t peak = preview->numbers().prediction->peak_memory_bytes;
  EXPECT_GT(peak, 0);
  EXPECT_TRUE(preview->shownText().contains("peak memory " + grouped(peak) + " B ("))
      << preview->shownText().toStdString();
  EXPECT_TRUE(preview->shownText().contains("on the fullest rank (resident)"))
      << preview->shownText().toStdString();
  const double alone_ms = preview->numbers().prediction->step_ms;

  const auto measured_ms = QDateTime::currentMSecsSinceEpoch() - 5 * 60 * 1000 - 30000;
  const json bench{
      {"source", "flotilla nodes bench over gpu-a,gpu-b (2 ranks)"},
      {"measured_ms", measured_ms},
      {"ranks", 2},
      {"allreduce", json::array({{{"bytes", 1024}, {"time_us", 40}, {"busbw_gbps", 0.2}},
                                 {{"bytes", 1 << 26}, {"time_us", 3.4e5}, {"busbw_gbps", 0.2}}})}};
  preview->setLinkBenches({{"gpu-a,gpu-b", QString::fromStdString(bench.dump())}});
  wait_until(
      [&] {
        return preview->state() == PlanPreview::State::shown && preview->numbers().prediction &&
               !preview->numbers().prediction->links.isEmpty();
      },
      120s);
  ASSERT_TRUE(preview->numbers().prediction);
  const auto& predicted = *preview->numbers().prediction;
  const QString text = preview->shownText();
  EXPECT_TRUE(
      text.contains("links: flotilla nodes bench over gpu-a,gpu-b (2 ranks); measured 5 min ago"))
      << text.toStdString();
  EXPECT_FALSE(text.contains("No link bench")) << text.toStdString();
  // The same blocks again: this machine's profile of them, not a second timing.
  EXPECT_TRUE(predicted.from_profile);
  EXPECT_TRUE(text.contains("blocks from this machine's profile (measured just now) on 16 samples"))
      << text.toStdString();
  EXPECT_TRUE(
      text.contains(grouped(static_cast<int64_t>(predicted.samples_per_s + 0.5)) + " samples/s"))
      << text.toStdString();
  // 1.7 MB of gradients at 0.2 GB/s: the all-reduce's tail outlasts any timing noise.
  EXPECT_GT(predicted.exposed_ms, 1.0);
  EXPECT_GT(predicted.step_ms, 0.0);
  EXPECT_GT(alone_ms, 0.0);

  // A newer bench of the same nodes predicts again on it; its ranks said
  // both nodes are one machine, whose cores the two ranks then share.
  auto newer = bench;
  newer["source"] = "newer bench over gpu-a,gpu-b";
  newer["nodes"] = {{"gpu-a", {{"machine", "boot-1"}, {"cores", 2}}},
                    {"gpu-b", {{"machine", "boot-1"}, {"cores", 2}}}};
  preview->setLinkBenches({{"gpu-a,gpu-b", QString::fromStdString(newer.dump())}});
  wait_until(
      [&] {
        return preview->state() == PlanPreview::State::shown && preview->numbers().prediction &&
               preview->numbers().prediction->links.startsWith("newer bench");
      },
      120s);
  EXPECT_TRUE(preview->shownText().contains("links: newer bench over gpu-a,gpu-b"))
      << preview->shownText().toStdString();
  EXPECT_TRUE(preview->shownText().contains("up to 2 ranks share one machine's cores"))
      << preview->shownText().toStdString();
  designer.resize(1200, 800);
  designer.show();
  save_screenshot(designer, "designer-plan-prediction");
  qunsetenv("FLOTILLA_PROFILE_DIR");
}

// The blocks' times from a profile a node sent (`flotilla nodes profile`),
// said as such, and in red when the run's nodes have none.
TEST(PlanPreview, TakesTheBlocksFromANodesProfileAndSaysWhenThereIsNone) {
  const char* yaml =
      "name: plan-profiled\nmodel: small_cnn\ndataset: synthetic\n"
      "synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 32}\n"
      "strategy: ddp\nnodes: [gpu-a, gpu-b]\nbatch_size: 16\nthreads: 1\n";
  testing::TempDir dir;
  qputenv("FLOTILLA_PROFILE_DIR", QByteArray::fromStdString((dir.path() / "kept").string()));
  // The record the node's engine sends, made here by the same engine.
  const auto config = dir.path() / "run.yaml";
  std::ofstream(config) << yaml;
  const auto records = dir.path() / "records.jsonl";
  QProcess train;
  train.start(FLOTILLA_TRAIN_BINARY,
              {"--profile-blocks", "--config", QString::fromStdString(config.string()), "--records",
               QString::fromStdString(records.string())});
  ASSERT_TRUE(train.waitForFinished(120000));
  ASSERT_EQ(train.exitCode(), 0) << train.readAllStandardError().toStdString();
  json record;
  std::ifstream lines(records);
  for (std::string line; std::getline(lines, line);)
    if (const auto j = json::parse(line); j.value("type", "") == "profile") record = j;
  ASSERT_TRUE(record.is_object());
  record["node"] = "gpu-a";
  // The node's, slower than here.
  auto& first = record["profile"]["blocks"][0];
  first["full_ms"] = first["full_ms"].get<double>() + 40.0;
  first["forward_ms"] = first["forward_ms"].get<double>() + 20.0;

  ExperimentDesigner designer;
  PlanPreview* preview = designer.planPreview();
  preview->setPredicting(true);
  ASSERT_TRUE(previewed(designer, yaml));
  EXPECT_TRUE(preview->shownText().contains("No block profile of gpu-a,gpu-b"))
      << preview->shownText().toStdString();
  EXPECT_TRUE(preview->shownText().contains("flotilla nodes profile gpu-a RUN.yaml"))
      << preview->shownText().toStdString();

  preview->setNodeProfiles({{"gpu-a", QString::fromStdString("[" + record.dump() + "]")}});
  wait_until(
      [&] {
        return preview->state() == PlanPreview::State::shown && preview->numbers().prediction &&
               !preview->numbers().prediction->profile_node.isEmpty();
      },
      120s);
  ASSERT_TRUE(preview->numbers().prediction);
  const QString text = preview->shownText();
  EXPECT_EQ(preview->numbers().prediction->profile_node, "gpu-a");
  EXPECT_TRUE(text.contains("blocks from node gpu-a's profile (measured just now) on 16 samples"))
      << text.toStdString();
  EXPECT_FALSE(text.contains("No block profile")) << text.toStdString();
  EXPECT_GE(preview->numbers().prediction->stage_ms.at(0), 40.0);
  designer.resize(1200, 800);
  designer.show();
  save_screenshot(designer, "designer-plan-node-profile");
  qunsetenv("FLOTILLA_PROFILE_DIR");
}

}  // namespace
}  // namespace flotilla::gui
