// A study's chart in its seed's shape: ours averaged over repeats by line and
// x, out-of-memory points marked, the seed's points beside ours, and every
// carried study drawing one.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "flotilla/controller/seed_table.h"
#include "flotilla/controller/study.h"
#include "flotilla/controller/study_chart.h"
#include "flotilla/protocol/experiment_config.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;

// A study table of one run a point: its y figure from `figure(point)`, the
// points `oom_at` ending out of memory.
struct FakeStudy {
  StudyTable table;
  std::vector<SweepPointRow> points;
};

template <class Figure>
FakeStudy fake_study(const SweepSpec& spec, const Figure& figure, std::set<int64_t> oom_at = {}) {
  FakeStudy out;
  for (const auto& point : expand_sweep(spec)) {
    SweepPointRow row;
    row.index = static_cast<int64_t>(out.points.size());
    row.values_json = point.values_json;
    row.config_json = point.config_json;
    row.run_id = "run" + std::to_string(row.index);
    CompareRow compared;
    if (oom_at.count(row.index))
      compared.run.state = RunState::oom;
    else
      compared.cells[spec.report.chart.y].number = figure(row.index);
    out.points.push_back(row);
    out.table.runs.push_back(row.run_id);
    out.table.compare.rows.push_back(compared);
  }
  return out;
}

const json* line_named(const json& chart, const std::string& name, const std::string& source) {
  for (const auto& line : chart["series"])
    if (line["name"] == name && line["source"] == source) return &line;
  return nullptr;
}

TEST(StudyChart, RepeatsAreAveragedByLineAndXAndAnOutOfMemoryPointIsMarked) {
  const auto spec = parse_sweep(R"(
name: chart
base: {model: small_cnn, dataset: synthetic, epochs: 1, max_steps: 2}
axes:
  ranks_per_node: [1, 2]
  batch_size: [8, 16]
repeat: 2
report:
  chart: {x: ranks_per_node, y: throughput, series: batch_size}
)");
  // Points in grid order, repeats adjacent: (1, 8) x2, (1, 16) x2, (2, 8) x2, (2, 16) x2.
  const auto study = fake_study(spec, [](int64_t i) { return 10.0 * i; }, {7});
  const auto chart = json::parse(study_chart(spec, study.table, study.points, std::nullopt).json);
  EXPECT_EQ(chart["x_label"], "ranks_per_node");
  ASSERT_EQ(chart["series"].size(), 2u);
  const auto* eight = line_named(chart, "batch_size 8", "ours");
  const auto* sixteen = line_named(chart, "batch_size 16", "ours");
  ASSERT_TRUE(eight && sixteen) << chart.dump(1);
  ASSERT_EQ((*eight)["points"].size(), 2u);
  EXPECT_EQ((*eight)["points"][0]["x"], 1.0);
  EXPECT_DOUBLE_EQ((*eight)["points"][0]["y"].get<double>(), 5.0);   // (0 + 10) / 2
  EXPECT_DOUBLE_EQ((*eight)["points"][1]["y"].get<double>(), 45.0);  // (40 + 50) / 2
  // (2, 16): one repeat ran out of memory, the other measured 60.
  EXPECT_DOUBLE_EQ((*sixteen)["points"][1]["y"].get<double>(), 60.0);
  EXPECT_TRUE((*sixteen)["points"][1].value("oom", false));
  EXPECT_FALSE((*eight)["points"][1].value("oom", false));
}

// Variants labelled by numbers (frozen blocks "0".."3") are a numeric x
// axis; labels that are words stay categories.
TEST(StudyChart, VariantsLabelledByNumbersAreANumericAxis) {
  const auto numbered = parse_sweep(R"(
name: chart
base: {model: small_cnn, dataset: synthetic, epochs: 1, max_steps: 2}
axes:
  frozen: {variants: {"0": {batch_size: 8}, "2": {batch_size: 16}}}
report:
  chart: {x: frozen, y: sent_mb}
)");
  auto study = fake_study(numbered, [](int64_t i) { return 1.0 + i; });
  auto chart = json::parse(study_chart(numbered, study.table, study.points, std::nullopt).json);
  EXPECT_EQ(chart["series"][0]["points"][1]["x"], 2.0) << chart.dump(1);
  const auto worded = parse_sweep(R"(
name: chart
base: {model: small_cnn, dataset: synthetic, epochs: 1, max_steps: 2}
axes:
  algorithm: {variants: {DDP: {batch_size: 8}, "2 GPUs": {batch_size: 16}}}
report:
  chart: {x: algorithm, y: sent_mb}
)");
  study = fake_study(worded, [](int64_t i) { return 1.0 + i; });
  chart = json::parse(study_chart(worded, study.table, study.points, std::nullopt).json);
  EXPECT_EQ(chart["series"][0]["points"][1]["x"], "2 GPUs") << chart.dump(1);
}

TEST(StudyChart, TheSeedsPointsJoinAsTheirOwnLinesWithTheirOutOfMemoryRows) {
  const auto spec = load_study("pipe-vs-ddp-memory", "gpu");
  const auto seed = carried_seed_table(spec);
  ASSERT_TRUE(seed);
  const auto study = fake_study(spec, [](int64_t) { return 1.0; });
  const auto drawn = study_chart(spec, study.table, study.points, seed);
  EXPECT_GT(drawn.seed_points, 0);
  const auto chart = json::parse(drawn.json);
  const auto* ddp = line_named(chart, "ranks_per_node 3, DDP", "seed");
  ASSERT_TRUE(ddp) << chart.dump(1);
  std::map<double, json> by_batch;
  for (const auto& point : (*ddp)["points"]) by_batch[point["x"].get<double>()] = point;
  // The seed's table: 3 ranks, DDP, batch 64 took 14336 MiB; batch 128 ran out of memory.
  ASSERT_TRUE(by_batch.count(64) && by_batch.count(128));
  EXPECT_DOUBLE_EQ(by_batch[64]["y"].get<double>(), 14336.0);
  EXPECT_TRUE(by_batch[128]["oom"].get<bool>());
  EXPECT_TRUE(by_batch[128]["y"].is_null());
  EXPECT_TRUE(line_named(chart, "ranks_per_node 3, DDP", "ours"));
}

// Every carried study at every scale has a chart whose x and series the
// points carry and whose y is a compare column: the data names one line per
// series value of ours, and the seed's table, where the study has one and it
// holds x and y, adds lines of its own.
TEST(StudyChart, EveryCarriedStudyDrawsItsChart) {
  for (const auto& study_name : study_names())
    for (const auto& scale : study_scales(study_name)) {
      SCOPED_TRACE(study_name + " " + scale);
      const auto spec = load_study(study_name, scale);
      ASSERT_FALSE(spec.report.chart.empty());
      const auto seed = carried_seed_table(spec);
      const auto study = fake_study(spec, [](int64_t i) { return 1.0 + i; });
      const auto drawn = study_chart(spec, study.table, study.points, seed);
      const auto chart = json::parse(drawn.json);
      size_t ours_points = 0, seed_lines = 0;
      for (const auto& line : chart["series"]) {
        if (line["source"] == "seed")
          ++seed_lines;
        else
          ours_points += line["points"].size();
        for (const auto& point : line["points"])
          EXPECT_TRUE(point["x"].is_number() || point["x"].is_string());
      }
      EXPECT_GT(ours_points, 0u);
      const bool seed_has_chart =
          seed && std::count(seed->keys.begin(), seed->keys.end(), spec.report.chart.x) &&
          std::count(seed->keys.begin(), seed->keys.end(), spec.report.chart.y);
      EXPECT_EQ(seed_lines > 0, seed_has_chart);
      EXPECT_EQ(drawn.seed_points > 0, seed_has_chart);  // what the report's words follow
      EXPECT_EQ(static_cast<size_t>(drawn.our_points), ours_points);
    }
}

TEST(StudyChart, AChartOfAFigureThatIsNoCompareColumnIsRefused) {
  auto spec = load_study("dp-scaling", "cpu");
  spec.report.chart.y = "speed";
  const auto problems = study_report_problems(spec);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("report.chart.y: \"speed\" is not a compare column", 0), 0u)
      << problems[0];
}

}  // namespace
}  // namespace flotilla::controller
