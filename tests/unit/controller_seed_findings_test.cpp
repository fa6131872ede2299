// The seed's findings: the file read with its mistakes named, each finding
// judged against the study's figures, and every carried file loading with
// its study.
#include <gtest/gtest.h>

#include <set>

#include "flotilla/controller/seed_findings.h"
#include "flotilla/controller/study.h"
#include "flotilla/protocol/experiment_config.h"

namespace flotilla::controller {
namespace {

const char* kHeader = "finding,figure,row,relation,than,if_differs\n";

SeedTable seed_of_dp_scaling() {
  return parse_seed_table("ranks_per_node,batch_size,speedup\n1,32,1\n2,32,0.567\n2,512,1.444\n",
                          "x.seed.csv");
}

std::string problem_of(const std::string& rows) {
  try {
    parse_seed_findings(kHeader + rows, "x.findings.csv", seed_of_dp_scaling());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SeedFindings, AFindingNamesTwoSeedRowsAndTheOrderTheSeedShows) {
  const auto findings =
      parse_seed_findings(std::string(kHeader) +
                              "\"Two GPUs, slower\",speedup,ranks_per_node=2; batch_size=32,below,"
                              "ranks_per_node=1;batch_size=32,shared cores\n",
                          "x.findings.csv", seed_of_dp_scaling());
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].says, "Two GPUs, slower");
  EXPECT_EQ(findings[0].row, 1u);
  EXPECT_EQ(findings[0].than, 0u);
  EXPECT_EQ(findings[0].relation, "below");
  EXPECT_EQ(findings[0].if_differs, "shared cores");
}

struct BadFinding {
  const char* name;
  const char* row;
  const char* problem;
};

void PrintTo(const BadFinding& b, std::ostream* os) {
  *os << b.name;
}

class BadFindingTest : public ::testing::TestWithParam<BadFinding> {};

TEST_P(BadFindingTest, IsRefusedNamingTheLine) {
  EXPECT_EQ(problem_of(GetParam().row), GetParam().problem);
}

const BadFinding kBadFindings[] = {
    {"FigureNotInTheSeedTable",
     "x,throughput,ranks_per_node=2; batch_size=32,below,ranks_per_node=1; batch_size=32,\n",
     "x.findings.csv line 2: figure \"throughput\" is not a figure of the seed table"},
    {"RelationUnknown",
     "x,speedup,ranks_per_node=2; batch_size=32,smaller,ranks_per_node=1; batch_size=32,\n",
     "x.findings.csv line 2: relation: expected above or below, got \"smaller\""},
    {"RowNamingNone",
     "x,speedup,ranks_per_node=8; batch_size=32,below,ranks_per_node=1; batch_size=32,\n",
     "x.findings.csv line 2: \"ranks_per_node=8; batch_size=32\" names 0 rows of the seed table; "
     "expected one"},
    {"RowNamingTwo", "x,speedup,ranks_per_node=2,below,ranks_per_node=1; batch_size=32,\n",
     "x.findings.csv line 2: \"ranks_per_node=2\" names 2 rows of the seed table; expected one"},
    {"RowKeyUnknown", "x,speedup,gpus=2,below,ranks_per_node=1; batch_size=32,\n",
     "x.findings.csv line 2: \"gpus=2\" is not key=value with a key of the seed table"},
    {"NotWhatTheSeedShows",
     "x,speedup,ranks_per_node=2; batch_size=32,above,ranks_per_node=1; batch_size=32,\n",
     "x.findings.csv line 2: the seed's own speedup figures do not show this (0.567 < 1.000)"},
};

INSTANTIATE_TEST_SUITE_P(Refusals, BadFindingTest, ::testing::ValuesIn(kBadFindings),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(SeedFindings, AWrongHeaderIsRefused) {
  try {
    parse_seed_findings("finding,figure\nx,speedup\n", "x.findings.csv", seed_of_dp_scaling());
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("x.findings.csv line 1: expected the header", 0), 0u)
        << e.what();
  }
}

// Ours keep the seed's order: agrees; ours reverse it: differs, with the
// finding's reason; a row without our figure: not measured.
TEST(SeedFindings, EachFindingIsJudgedByTheOrderOfOurFigures) {
  const auto seed = seed_of_dp_scaling();
  const auto findings = parse_seed_findings(
      std::string(kHeader) +
          "slower,speedup,ranks_per_node=2; batch_size=32,below,ranks_per_node=1; "
          "batch_size=32,shared cores\n"
          "scales,speedup,ranks_per_node=2; batch_size=512,above,ranks_per_node=2; "
          "batch_size=32,\n",
      "x.findings.csv", seed);
  SeedComparison comparison;
  comparison.match_keys = {"ranks_per_node", "batch_size"};
  comparison.columns = {"speedup"};
  const auto row = [&](double seed_figure, std::optional<double> ours) {
    comparison.rows.push_back({{}, {{"speedup", seed_figure, ours, std::nullopt}}});
  };
  row(1, 1.0);
  row(0.567, 1.185);
  row(1.444, 1.581);
  auto verdicts = judge_findings(findings, comparison);
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0].verdict, "differs");
  EXPECT_EQ(verdicts[0].why, "seed 0.567 < 1.000, ours 1.185 > 1.000: shared cores");
  EXPECT_EQ(verdicts[1].verdict, "agrees");
  EXPECT_EQ(verdicts[1].why, "seed 1.444 > 0.567, ours 1.581 > 1.185");
  EXPECT_NE(findings_markdown(verdicts).find("| slower | speed-up | 0.567 vs 1.000 | 1.185 vs "
                                             "1.000 | **differs** |"),
            std::string::npos)
      << findings_markdown(verdicts);

  comparison.rows[2].figures[0].ours.reset();
  verdicts = judge_findings(findings, comparison);
  EXPECT_EQ(verdicts[1].verdict, "not measured");
  EXPECT_EQ(verdicts[1].why, "the study has no speedup for the first row");
}

// Every carried findings file loads against its seed table (the seed shows
// each finding), and the studies that carry one are those whose seed table
// has rows to order.
TEST(SeedFindings, EveryCarriedFileLoadsWithItsSeedTable) {
  std::set<std::string> with_findings;
  for (const auto& study : study_names())
    for (const auto& scale : study_scales(study)) {
      const auto spec = load_study(study, scale);
      const auto seed = carried_seed_table(spec);
      if (!seed) continue;
      const auto findings = carried_seed_findings(spec, *seed);
      if (findings.empty()) continue;
      with_findings.insert(spec.report.seed);
      const auto comparison = compare_with_seed(*seed, spec, StudyTable{}, {});
      const auto verdicts = judge_findings(findings, comparison);
      ASSERT_EQ(verdicts.size(), findings.size()) << study << " " << scale;
      for (const auto& v : verdicts) EXPECT_EQ(v.verdict, "not measured") << v.says;
    }
  EXPECT_EQ(with_findings, (std::set<std::string>{"dp-scaling", "pipeline-vs-dp", "pipetransformer",
                                                  "sort-quantization"}));
}

}  // namespace
}  // namespace flotilla::controller
