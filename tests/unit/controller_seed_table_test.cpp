// The seed's table beside a study's: the file read with its mistakes named,
// its rows matched to the study's runs, ours over seed.
#include <gtest/gtest.h>

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
  for (const auto& study : study_names())
    for (const auto& scale : study_scales(study)) {
      const auto spec = load_study(study, scale);  // refuses a table whose keys do not fit
      if (spec.report.seed.empty()) continue;
      ++seeded;
      const auto table = carried_seed_table(spec);
      ASSERT_TRUE(table) << study << " " << scale;
      EXPECT_FALSE(table->rows.empty());
    }
  EXPECT_GE(seeded, 3u);  // dp-scaling at cpu, gpu and gpu1
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
