// The seed's table beside a study's: the file read with its mistakes named,
// its rows matched to the study's runs, ours over seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "flotilla/controller/seed_table.h"
#include "flotilla/controller/study.h"
#include "flotilla/protocol/experiment_config.h"

namespace flotilla::controller {
namespace {

std::string problem_of(const std::string& text) {
  try {
    parse_seed_table(text, "x.seed.csv");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SeedTable, ReadsQuotedCellsAndNamesTheLineOfAMistake) {
  const auto table = parse_seed_table(
      "row,speedup\r\n\"Pipeline, 2 GPUs \"\"A\"\"\",1.5\n\nplain,\n", "x.seed.csv");
  EXPECT_EQ(table.keys, (std::vector<std::string>{"row", "speedup"}));
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0], (std::vector<std::string>{"Pipeline, 2 GPUs \"A\"", "1.5"}));
  EXPECT_EQ(table.rows[1], (std::vector<std::string>{"plain", ""}));
  EXPECT_EQ(problem_of("a,b\n1,2,3\n"),
            "x.seed.csv line 2: expected 2 cells as the header has, got 3");
  EXPECT_EQ(problem_of("a,b\n\"1,2\n"), "x.seed.csv line 2: a quote is left open");
  EXPECT_EQ(problem_of("a,b\n"), "x.seed.csv: expected a header of keys and at least one row");
}

TEST(SeedTable, EveryCarriedSeedTableLoadsWithItsStudy) {
  size_t seeded = 0;
  std::set<std::string> tables;
  for (const auto& study : study_names())
    for (const auto& scale : study_scales(study)) {
      const auto spec = load_study(study, scale);  // refuses a table whose keys do not fit
      if (spec.report.seed.empty()) continue;
      ++seeded;
      tables.insert(spec.report.seed);
      const auto table = carried_seed_table(spec);
      ASSERT_TRUE(table) << study << " " << scale;
      EXPECT_FALSE(table->rows.empty());
      // Every key is a match key or a figure, and with no runs every row is
      // there with the seed's figures and no ours.
      const auto comparison = compare_with_seed(*table, spec, StudyTable{}, {});
      EXPECT_EQ(comparison.match_keys.size() + comparison.columns.size(), table->keys.size())
          << study << " " << scale;
      EXPECT_FALSE(comparison.match_keys.empty()) << study << " " << scale;
      EXPECT_FALSE(comparison.columns.empty()) << study << " " << scale;
      ASSERT_EQ(comparison.rows.size(), table->rows.size()) << study << " " << scale;
      for (const auto& row : comparison.rows)
        for (const auto& figure : row.figures) EXPECT_FALSE(figure.ours) << study << " " << scale;
    }
  // Every carried seed table, and pipetransformer's (seed 000's DDP against
  // Pipe+DDP at 4 GPUs a machine) at cpu scale only.
  EXPECT_EQ(tables,
            (std::set<std::string>{"dp-scaling", "pipe-vs-ddp-memory", "pipeline-vs-dp",
                                   "pipetransformer", "sort-quantization", "vgg-freeze-traffic"}));
  // dp-scaling at every scale, four at cpu and gpu, pipetransformer at cpu.
  EXPECT_EQ(seeded, 12u);
}

// Each seed row against the points of its study: a variant label spelled as
// the study spells it, and at the seed's own sizes (gpu) every row finds its
// points; at every scale some row does.
TEST(SeedTable, EveryCarriedSeedRowFindsTheStudysPoints) {
  for (const auto& study : study_names())
    for (const auto& scale : study_scales(study)) {
      const auto spec = load_study(study, scale);
      if (spec.report.seed.empty()) continue;
      const auto seed = carried_seed_table(spec);
      ASSERT_TRUE(seed);
      for (const auto& axis : spec.axes) {
        // One GPU holds the seed's 1-GPU rows only (dp-scaling's gpu_nums "1").
        if (!axis.has_variants() || scale == "gpu1") continue;
        const auto at = std::find(seed->keys.begin(), seed->keys.end(), axis.key);
        if (at == seed->keys.end()) continue;
        const auto k = static_cast<size_t>(at - seed->keys.begin());
        for (const auto& row : seed->rows)
          EXPECT_NE(
              std::find(axis.values.begin(), axis.values.end(), nlohmann::json(row[k]).dump()),
              axis.values.end())
              << study << " " << scale << ": no variant \"" << row[k] << "\" of " << axis.key;
      }
      // One run a point, every figure 1 in its compare row. A point refused
      // here (gpu scale's CIFAR-10 files are not on this machine) keeps its
      // axis values, what the tables match on at gpu scale.
      StudyTable table;
      std::vector<SweepPointRow> points;
      for (const auto& point : expand_sweep(spec)) {
        SweepPointRow row;
        row.index = point.index;
        row.values_json = point.values_json;
        row.config_json = point.config_json;
        row.run_id = "run" + std::to_string(point.index);
        points.push_back(row);
        table.runs.push_back(row.run_id);
        CompareRow compared;
        for (const auto& key : seed->keys) compared.cells[key].number = 1.0;
        table.compare.rows.push_back(compared);
      }
      ASSERT_FALSE(points.empty()) << study << " " << scale;
      const auto comparison = compare_with_seed(*seed, spec, table, points);
      size_t found = 0;
      for (size_t r = 0; r < comparison.rows.size(); ++r) {
        const auto& figures = comparison.rows[r].figures;
        const bool has = !figures.empty() && figures.front().ours.has_value();
        found += has ? 1 : 0;
        if (scale == "gpu") {
          EXPECT_TRUE(has) << study << " gpu: seed row " << r + 1 << " finds no point";
        }
      }
      EXPECT_GT(found, 0u) << study << " " << scale << ": no seed row finds a point";
    }
}

TEST(SeedTable, AStudyNamingAnUnknownSeedTableIsRefused) {
  SweepSpec spec;
  spec.name = "x";
  spec.report.seed = "no-such-study";
  const auto problems = study_report_problems(spec);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("report.seed: no seed table \"no-such-study.seed.csv\"", 0), 0u)
      << problems[0];
}

}  // namespace
}  // namespace flotilla::controller
