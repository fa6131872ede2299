// The sweep file: parsing, every refusal, the grid's order, merged values,
// repeats and what `until: oom` drops.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "flotilla/protocol/sweep.h"
#include "temp_dir.h"

namespace flotilla {
namespace {

using nlohmann::json;

const char* kBase = R"(
name: ladder
base:
  model: small_cnn
  dataset: synthetic
  synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 16}
  max_steps: 3
)";

std::vector<std::string> problems_of(const std::string& yaml) {
  try {
    parse_sweep(yaml, "sweep.yaml");
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

json config_of(const SweepPoint& point) {
  return json::parse(point.config_json);
}

TEST(Sweep, GridIsTheProductInFileOrderWithTheLastAxisFastest) {
  const auto spec = parse_sweep(std::string(kBase) + R"(
axes:
  batch_size: [8, 16, 32]
  optimizer.lr: [0.1, 0.01]
)");
  ASSERT_EQ(spec.axes.size(), 2u);
  EXPECT_EQ(spec.axes[0].key, "batch_size");
  EXPECT_EQ(spec.axes[1].key, "optimizer.lr");
  EXPECT_EQ(sweep_size(spec), 6);
  const auto points = expand_sweep(spec);
  ASSERT_EQ(points.size(), 6u);
  const std::vector<std::pair<int64_t, double>> expected{{8, 0.1},   {8, 0.01}, {16, 0.1},
                                                         {16, 0.01}, {32, 0.1}, {32, 0.01}};
  for (size_t i = 0; i < points.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(points[i].index, static_cast<int64_t>(i));
    EXPECT_FALSE(points[i].refused()) << points[i].problems.front();
    const auto config = config_of(points[i]);
    EXPECT_EQ(config["batch_size"], expected[i].first);
    EXPECT_DOUBLE_EQ(config["optimizer"]["lr"].get<double>(), expected[i].second);
    EXPECT_EQ(config["name"], "ladder#" + std::to_string(i + 1));
    EXPECT_EQ(config["max_steps"], 3);  // the base's keys stay
    EXPECT_EQ(points[i].coords,
              (std::vector<int64_t>{static_cast<int64_t>(i / 2), static_cast<int64_t>(i % 2)}));
  }
  // The values as shown, in axis order (an ordered mapping, not sorted).
  EXPECT_EQ(points[3].values_json, R"({"batch_size":16,"optimizer.lr":0.01})");
}

TEST(Sweep, AnAxisOrderReversedInTheFileReversesTheGrid) {
  const auto points = expand_sweep(parse_sweep(std::string(kBase) + R"(
axes:
  optimizer.lr: [0.1, 0.01]
  batch_size: [8, 16]
)"));
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(config_of(points[1])["batch_size"], 16);
  EXPECT_DOUBLE_EQ(config_of(points[1])["optimizer"]["lr"].get<double>(), 0.1);
}

TEST(Sweep, AMappingValueIsMergedIntoItsSectionKeepingTheOtherKeys) {
  const auto points = expand_sweep(parse_sweep(R"(
name: codec
base:
  model: small_cnn
  dataset: synthetic
  strategy: pipeline
  ranks_per_node: 2
  chunks: 2
  compression: {method: uniform, bits: 8, split_bits: 0}
axes:
  compression: [{method: none}, {method: sort_quant, bits: 12, split_bits: 4}]
)"));
  ASSERT_EQ(points.size(), 2u);
  const auto none = config_of(points[0])["compression"];
  EXPECT_EQ(none["method"], "none");
  EXPECT_EQ(none["bits"], 8);  // from the base: only method moved
  const auto quantized = config_of(points[1])["compression"];
  EXPECT_EQ(quantized["method"], "sort_quant");
  EXPECT_EQ(quantized["bits"], 12);
  EXPECT_EQ(quantized["split_bits"], 4);
  EXPECT_EQ(value_text(nlohmann::ordered_json::parse(points[1].values_json)["compression"].dump()),
            "{method: sort_quant, bits: 12, split_bits: 4}");
}

TEST(Sweep, VariantsMergeIntoTheWholeConfigAndShowTheirLabels) {
  const auto spec = parse_sweep(R"(
name: algorithms
base: {model: small_cnn, dataset: synthetic, ranks_per_node: 4, strategy: ddp}
axes:
  algorithm:
    variants:
      DDP: {strategy: ddp}
      Pipe+DDP: {strategy: pipeline_ddp, chunks: 4, replicas: 2}
  batch_size: [64]
)");
  ASSERT_EQ(spec.axes[0].values.size(), 2u);
  const auto points = expand_sweep(spec);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(config_of(points[0])["strategy"], "ddp");
  EXPECT_EQ(config_of(points[0])["chunks"], 1);
  EXPECT_EQ(config_of(points[1])["strategy"], "pipeline_ddp");
  EXPECT_EQ(config_of(points[1])["chunks"], 4);
  EXPECT_EQ(config_of(points[1])["replicas"], 2);
  EXPECT_EQ(points[1].values_json, R"({"algorithm":"Pipe+DDP","batch_size":64})");
}

TEST(Sweep, RepeatRunsEachPointWithTheNextSeedsRightAfterIt) {
  const auto spec =
      parse_sweep(std::string(kBase) + "  seed: 7\naxes:\n  batch_size: [8, 16]\n" + "repeat: 3\n");
  EXPECT_EQ(sweep_size(spec), 6);
  const auto points = expand_sweep(spec);
  ASSERT_EQ(points.size(), 6u);
  for (size_t i = 0; i < points.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(points[i].repeat, static_cast<int64_t>(i % 3));
    EXPECT_EQ(config_of(points[i])["seed"], 7 + static_cast<int64_t>(i % 3));
    EXPECT_EQ(config_of(points[i])["batch_size"], i < 3 ? 8 : 16);
  }
}

TEST(Sweep, PointsTheValidatorRefusesAreListedWithItsMessages) {
  const auto points = expand_sweep(parse_sweep(std::string(kBase) + R"(
axes:
  strategy: [ddp, pipeline]
  chunks: [1, 4]
)"));
  ASSERT_EQ(points.size(), 4u);
  EXPECT_FALSE(points[0].refused());  // ddp, 1 chunk
  ASSERT_TRUE(points[1].refused());   // ddp, 4 chunks
  EXPECT_EQ(points[1].problems,
            (std::vector<std::string>{"chunks: only pipeline strategies split a batch into "
                                      "micro-batches; got 4 with strategy \"ddp\""}));
  EXPECT_TRUE(points[1].config_json.empty());
  // A pipeline on one rank is refused whatever its chunks.
  ASSERT_TRUE(points[2].refused());
  EXPECT_NE(points[2].problems.front().find("needs at least 2 stages"), std::string::npos);
  EXPECT_TRUE(points[3].refused());
}

TEST(Sweep, NodesGivenReplaceTheBasesNodes) {
  const auto points = expand_sweep(
      parse_sweep(std::string(kBase) + "  nodes: [a]\naxes:\n  batch_size: [8]\n"), {"b"});
  EXPECT_EQ(config_of(points.at(0))["nodes"], json::array({"b"}));
}

TEST(Sweep, OnNodesAppliesOnlyWhenTheSweepIsGivenNodes) {
  const auto spec = parse_sweep(std::string(kBase) + R"(  strategy: ddp
  ranks_per_node: 3
on_nodes: {ranks_per_node: 1, synthetic: {train_samples: 96}}
axes:
  batch_size: [8]
)");
  const auto here = config_of(expand_sweep(spec).at(0));
  EXPECT_EQ(here["ranks_per_node"], 3);
  EXPECT_EQ(here["synthetic"]["train_samples"], 64);
  const auto spread = config_of(expand_sweep(spec, {"a", "b", "c"}).at(0));
  EXPECT_EQ(spread["nodes"], json::array({"a", "b", "c"}));
  EXPECT_EQ(spread["ranks_per_node"], 1);
  EXPECT_EQ(spread["synthetic"]["train_samples"], 96);
  EXPECT_EQ(spread["synthetic"]["classes"], 10);  // merged into its section, not replacing it
  EXPECT_EQ(parse_sweep(sweep_to_json(spec), "stored").on_nodes_json, spec.on_nodes_json);
}

TEST(Sweep, BaseFileIsReadRelativeToTheSweepFile) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "presets");
  std::ofstream(dir.path() / "presets" / "small.yaml")
      << "model: small_cnn\ndataset: synthetic\nbatch_size: 4\n";
  std::filesystem::create_directories(dir.path() / "studies");
  const auto file = dir.path() / "studies" / "from-file.yaml";
  std::ofstream(file) << "base_file: ../presets/small.yaml\naxes: {optimizer.lr: [0.5]}\n";
  const auto spec = load_sweep(file);
  EXPECT_EQ(spec.name, "from-file");  // the file's stem when no name is given
  const auto points = expand_sweep(spec);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(config_of(points[0])["batch_size"], 4);
}

TEST(Sweep, ABaseNamedIsLeftForTheControllerToResolve) {
  const auto spec = parse_sweep("name: s\nbase: stored-one\naxes: {batch_size: [8]}\n");
  EXPECT_EQ(spec.base_experiment, "stored-one");
  EXPECT_TRUE(spec.base_json.empty());
  try {
    expand_sweep(spec);
    FAIL() << "an unresolved base expanded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.problems().front(),
              "base: the stored experiment \"stored-one\" has not been resolved into the sweep");
  }
}

// Found by fuzzing: a sweep file's bytes that are not UTF-8 made nlohmann
// throw from dump() instead of a ConfigError.
TEST(Sweep, AFileThatIsNotUtf8IsRefusedNamingLineAndColumn) {
  try {
    parse_sweep("name: s\nbase: {model: small_cnn}\naxes: {batch_size: [8, \x89]}\n", "s.yaml");
    FAIL() << "bytes that are not UTF-8 parsed";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.problems().front(), "s.yaml: line 3, column 24: not UTF-8 text (byte 0x89)");
  }
}

// "b\0\0\0" reads as UTF-32LE to yaml-cpp, which decoded the rest into bytes
// that are not UTF-8 (fuzzing: tests/fuzz/corpus/sweep/crash-nul-reads-as-utf32).
TEST(Sweep, AFileHoldingANulIsRefusedNamingLineAndColumn) {
  try {
    parse_sweep(std::string("b\0\0\0ack)\nname: s\n", 17), "s.yaml");
    FAIL() << "a file holding NULs parsed";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.problems().front(),
              "s.yaml: line 1, column 2: a NUL byte, which YAML and JSON text cannot hold");
  }
}

TEST(Sweep, StoredFormReadsBackTheSameSweep) {
  const auto spec = parse_sweep(std::string(kBase) + R"(
description: a ladder
axes:
  batch_size: {values: [8, 16, 4096], until: oom}
  compression: [{method: none}]
  algorithm: {variants: {DDP: {strategy: ddp}, Single: {strategy: single}}}
repeat: 2
)");
  const auto again = parse_sweep(sweep_to_json(spec), "stored");
  EXPECT_EQ(sweep_to_json(again), sweep_to_json(spec));
  EXPECT_EQ(again.description, "a ladder");
  ASSERT_EQ(again.axes.size(), 3u);
  EXPECT_TRUE(again.axes[0].until_oom);
  EXPECT_EQ(again.axes[2].key, "algorithm");
  EXPECT_EQ(again.axes[2].values, (std::vector<std::string>{"\"DDP\"", "\"Single\""}));
  EXPECT_EQ(again.repeat, 2);
  ASSERT_EQ(expand_sweep(again).size(), expand_sweep(spec).size());
}

// yaml-cpp refuses an implicit key longer than 1,024 characters; a key that
// fits in the file may not once JSON escapes it (fuzzing:
// tests/fuzz/corpus/sweep/crash-key-longer-once-escaped).
TEST(Sweep, AKeyLongerOnceEscapedReadsBackFromTheStoredForm) {
  const std::string backslashes(600, '\\');
  const std::string controls = "k" + std::string(200, '\x19');
  const auto spec = parse_sweep(
      "name: s\nbase:\n  model: small_cnn\n  " + backslashes + ": 1\n  " + controls + ": 2\n",
      "s.yaml");
  ASSERT_GT(sweep_to_json(spec).size(), 2u * 1024);
  const auto again = parse_sweep(sweep_to_json(spec), "stored");
  EXPECT_EQ(sweep_to_json(again), sweep_to_json(spec));
  const auto base = json::parse(again.base_json);
  EXPECT_EQ(base.at(backslashes), 1);
  EXPECT_EQ(base.at(controls), 2);
}

// JSON is read by a JSON parser and YAML by yaml-cpp; the same sweep written
// either way is the same sweep, numbers of the same type included.
TEST(Sweep, TheSameSweepInJsonAndInYamlReadsTheSame) {
  const auto from_yaml = parse_sweep(R"(
name: s
base: {model: small_cnn, max_steps: 3, a: -4, b: 9223372036854775807,
       c: 18446744073709551615, d: 1.5, e: "7", f: [true, null]}
axes: {batch_size: [8, 16]}
repeat: 2
)",
                                     "s.yaml");
  const auto from_json = parse_sweep(R"({"name": "s",
 "base": {"model": "small_cnn", "max_steps": 3, "a": -4, "b": 9223372036854775807,
          "c": 18446744073709551615, "d": 1.5, "e": "7", "f": [true, null]},
 "axes": {"batch_size": [8, 16]}, "repeat": 2})",
                                     "s.json");
  EXPECT_EQ(sweep_to_json(from_json), sweep_to_json(from_yaml));
  const auto base = json::parse(from_json.base_json);
  EXPECT_TRUE(base.at("b").is_number_integer());
  EXPECT_TRUE(base.at("c").is_number_float());
  EXPECT_EQ(from_json.repeat, 2);
  EXPECT_EQ(from_json.axes.at(0).values, (std::vector<std::string>{"8", "16"}));
}

TEST(Sweep, AReportSectionReadsBackAndNamesPointValues) {
  const auto spec = parse_sweep(std::string(kBase) + R"(
axes:
  ranks_per_node: [1, 2]
  batch_size: [8, 16]
report:
  columns: [ranks_per_node, batch_size, {epoch_s: time}, speedup]
  group_by: [batch_size]
  baseline: {ranks_per_node: 1}
  chart: {x: ranks_per_node, y: speedup, series: batch_size, title: Speed-up}
)");
  EXPECT_EQ(spec.report.chart.x, "ranks_per_node");
  EXPECT_EQ(spec.report.chart.y, "speedup");
  EXPECT_EQ(spec.report.chart.series, (std::vector<std::string>{"batch_size"}));
  EXPECT_EQ(spec.report.chart.title, "Speed-up");
  EXPECT_EQ(spec.report.columns,
            (std::vector<std::string>{"ranks_per_node", "batch_size", "epoch_s", "speedup"}));
  EXPECT_EQ(spec.report.headers, (std::vector<std::string>{"", "", "time", ""}));
  EXPECT_EQ(spec.report.group_by, (std::vector<std::string>{"batch_size"}));
  EXPECT_EQ(json::parse(spec.report.baseline_json), json::parse(R"({"ranks_per_node": 1})"));
  const auto again = parse_sweep(sweep_to_json(spec), "stored");
  EXPECT_EQ(sweep_to_json(again), sweep_to_json(spec));
  const auto points = expand_sweep(spec);
  ASSERT_EQ(points.size(), 4u);
  // An axis's value from the point's values, anything else from its config
  // (point 1: one rank, batch 16; the two-rank points need a strategy).
  ASSERT_FALSE(points[1].refused()) << points[1].problems.front();
  EXPECT_EQ(point_value_json(spec, points[1].values_json, points[1].config_json, "batch_size"),
            "16");
  EXPECT_EQ(point_value_json(spec, points[1].values_json, points[1].config_json, "model"),
            "\"small_cnn\"");
  EXPECT_EQ(
      point_value_json(spec, points[1].values_json, points[1].config_json, "synthetic.classes"),
      "10");
  EXPECT_EQ(point_value_json(spec, points[1].values_json, points[1].config_json, "optimizer.nope"),
            "null");
}

struct BadSweep {
  const char* name;
  const char* yaml;  // appended to kBase
  const char* message;
};
void PrintTo(const BadSweep& b, std::ostream* os) {
  *os << b.name;
}

class BadSweepTest : public ::testing::TestWithParam<BadSweep> {};

TEST_P(BadSweepTest, IsRefusedNamingTheKey) {
  const auto problems = problems_of(std::string(kBase) + GetParam().yaml);
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0], GetParam().message);
}

const BadSweep kBadSweeps[] = {
    {"UnknownAxisKey", "axes: {batchsize: [8, 16]}",
     "axes.batchsize: \"batchsize\" is not a config key (docs/sweeps.md lists them); an axis of "
     "another name needs variants"},
    {"UnknownNestedAxisKey", "axes: {compression.level: [1]}",
     "axes.compression.level: \"compression.level\" is not a config key (docs/sweeps.md lists "
     "them); an axis of another name needs variants"},
    {"EmptyAxis", "axes: {batch_size: []}",
     "axes.batch_size: an empty axis has no values; give at least one"},
    {"EmptyValuesList", "axes: {batch_size: {values: [], until: oom}}",
     "axes.batch_size: an empty axis has no values; give at least one"},
    {"UntilOomDescending", "axes: {batch_size: {values: [32, 128, 64], until: oom}}",
     "axes.batch_size: until: oom needs strictly ascending numbers, got [32, 128, 64]"},
    {"UntilOomRepeated", "axes: {batch_size: {values: [32, 32.0], until: oom}}",
     "axes.batch_size: until: oom needs strictly ascending numbers, got [32, 32.0]"},
    {"UntilOomOnText", "axes: {strategy: {values: [ddp, single], until: oom}}",
     "axes.strategy: until: oom needs strictly ascending numbers, got [ddp, single]"},
    {"UntilOomOnVariants", "axes: {a: {variants: {x: {batch_size: 8}}, until: oom}}",
     "axes.a: until: oom needs strictly ascending numbers, not variants"},
    {"UntilSomethingElse", "axes: {batch_size: {values: [8], until: nan}}",
     "axes.batch_size.until: the only stop is \"oom\", got \"nan\""},
    {"AxisNotAList", "axes: {batch_size: 8}",
     "axes.batch_size: expected a list of values, {values: [...], until: oom} or {variants: "
     "{label: {...}}}, got 8"},
    {"AxisMappingWithoutValues", "axes: {batch_size: {until: oom}}",
     "axes.batch_size: expected a list of values, {values: [...], until: oom} or {variants: "
     "{label: {...}}}, got a mapping"},
    {"AxisUnknownKey", "axes: {batch_size: {values: [8], upto: oom}}",
     "axes.batch_size.upto: unknown key; allowed: until, values, variants"},
    {"ValuesAndVariants", "axes: {a: {values: [1], variants: {x: {batch_size: 8}}}}",
     "axes.a: give values or variants, not both"},
    {"VariantNotAMapping", "axes: {a: {variants: {x: 8}}}",
     "axes.a.variants.x: expected a mapping of config keys, got 8"},
    {"SectionGivenAScalar", "axes: {compression: [none]}",
     "axes.compression: compression is a section: each value must be a mapping merged into it, "
     "got \"none\""},
    {"DuplicateValue", "axes: {batch_size: [8, 16, 8]}", "axes.batch_size: lists 8 twice"},
    {"NameAsAxis", "axes: {name: [a, b]}",
     "axes.name: points are named by the sweep (<sweep>#<n>); name is not an axis"},
    {"AxesNotAMapping", "axes: [batch_size]",
     "axes: expected a mapping of config keys to their values, got [\"batch_size\"]"},
    {"RepeatZero", "axes: {batch_size: [8]}\nrepeat: 0",
     "repeat: must be an integer from 1 to 1000 (runs of each point), got 0"},
    {"UnknownTopKey", "axes: {batch_size: [8]}\nrepeats: 3",
     "repeats: unknown key; allowed: axes, base, base_file, description, name, on_nodes, repeat, "
     "report"},
    {"OnNodesNotAMapping", "axes: {batch_size: [8]}\non_nodes: [ranks_per_node]",
     "on_nodes: expected a mapping of config keys to set when the sweep runs on named nodes "
     "(--nodes), e.g. {ranks_per_node: 1}, got [\"ranks_per_node\"]"},
    {"OnNodesUnknownKey", "axes: {batch_size: [8]}\non_nodes: {ranks: 1}",
     "on_nodes.ranks: not a config key (docs/config.md)"},
    {"OnNodesSettingNodes", "axes: {batch_size: [8]}\non_nodes: {nodes: [a]}",
     "on_nodes.nodes: cannot be set here (--nodes gives the nodes, the sweep names its runs)"},
    {"BaseAndBaseFile", "base_file: x.yaml\naxes: {batch_size: [8]}",
     "base_file: give base or base_file, not both"},
    {"ReportNotAMapping", "axes: {batch_size: [8]}\nreport: [speedup]",
     "report: expected a mapping with columns, group_by, baseline, seed and chart, got "
     "[\"speedup\"]"},
    {"ReportUnknownKey", "axes: {batch_size: [8]}\nreport: {colums: [speedup]}",
     "report.colums: unknown key; allowed: baseline, chart, columns, group_by, seed"},
    {"ReportChartWithoutY", "axes: {batch_size: [8]}\nreport: {chart: {x: batch_size}}",
     "report.chart.y: missing; expected a name"},
    {"ReportChartUnknownX", "axes: {batch_size: [8]}\nreport: {chart: {x: gpus, y: speedup}}",
     "report.chart.x: \"gpus\" is neither an axis of this sweep nor a config key"},
    {"ReportChartSeriesNotNames",
     "axes: {batch_size: [8]}\nreport: {chart: {x: batch_size, y: speedup, series: [1]}}",
     "report.chart.series: expected an axis name or a list of them, got [1]"},
    {"ReportChartUnknownKey",
     "axes: {batch_size: [8]}\nreport: {chart: {x: batch_size, y: speedup, colour: red}}",
     "report.chart.colour: unknown key; allowed: series, title, x, y"},
    {"ReportSeedNotText", "axes: {batch_size: [8]}\nreport: {seed: [dp-scaling]}",
     "report.seed: expected the name of a study's seed table (text), got [\"dp-scaling\"]"},
    {"ReportEmptyColumns", "axes: {batch_size: [8]}\nreport: {columns: []}",
     "report.columns: expected a non-empty list of names, got []"},
    {"ReportColumnTwice", "axes: {batch_size: [8]}\nreport: {columns: [speedup, speedup]}",
     "report.columns: lists speedup twice"},
    {"ReportGroupByUnknown", "axes: {batch_size: [8]}\nreport: {group_by: [batchsize]}",
     "report.group_by: \"batchsize\" is neither an axis of this sweep nor a config key"},
    {"ReportBaselineUnknownKey", "axes: {batch_size: [8]}\nreport: {baseline: {gpus: 1}}",
     "report.baseline.gpus: \"gpus\" is neither an axis of this sweep nor a config key"},
    {"ReportBaselineNotAMapping", "axes: {batch_size: [8]}\nreport: {baseline: 1}",
     "report.baseline: expected a mapping of axes or config keys to values, e.g. "
     "{ranks_per_node: 1}, got 1"},
};

INSTANTIATE_TEST_SUITE_P(Refusals, BadSweepTest, ::testing::ValuesIn(kBadSweeps),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Sweep, MissingBaseAndBadNamesAreRefused) {
  EXPECT_EQ(problems_of("name: s\naxes: {batch_size: [8]}\n"),
            (std::vector<std::string>{
                "base: missing: give the base experiment inline (a mapping of config keys), a "
                "stored experiment's name, or base_file"}));
  EXPECT_EQ(problems_of("base: {model: small_cnn}\n"),
            (std::vector<std::string>{"name: missing: a sweep needs a name"}));
  EXPECT_EQ(problems_of("name: 'a b'\nbase: {model: small_cnn}\n"),
            (std::vector<std::string>{"name: \"a b\" may hold only letters, digits, '.', '_' and "
                                      "'-' (it names the sweep on the command line)"}));
  const auto missing = problems_of("name: s\nbase_file: /nonexistent/base.yaml\n");
  EXPECT_EQ(missing, (std::vector<std::string>{"base_file: cannot read /nonexistent/base.yaml"}));
  const auto syntax = problems_of("name: s\nbase: {model: [\n");
  ASSERT_EQ(syntax.size(), 1u);
  EXPECT_EQ(syntax[0].rfind("sweep.yaml: line ", 0), 0u) << syntax[0];
}

TEST(Sweep, EveryProblemOfAFileIsReportedAtOnce) {
  const auto problems = problems_of(std::string(kBase) + R"(
axes:
  batchsize: [8]
  epochs: []
repeat: -1
)");
  EXPECT_EQ(problems.size(), 3u) << ::testing::PrintToString(problems);
}

TEST(Sweep, SizeIsCountedWithoutExpanding) {
  std::string yaml = std::string(kBase) + "axes:\n";
  for (const char* key : {"batch_size", "epochs", "max_steps", "seed"})
    yaml += std::string("  ") + key + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n";
  EXPECT_EQ(sweep_size(parse_sweep(yaml + "repeat: 3\n")), 11 * 11 * 11 * 11 * 3);
}

// Coordinates of a 4 (batch) x 2 (ranks) grid, repeat 2: [batch, ranks] per point.
std::vector<std::vector<int64_t>> ladder_coords() {
  std::vector<std::vector<int64_t>> coords;
  for (int64_t batch = 0; batch < 4; ++batch)
    for (int64_t ranks = 0; ranks < 2; ++ranks)
      for (int repeat = 0; repeat < 2; ++repeat) coords.push_back({batch, ranks});
  return coords;
}

TEST(Sweep, OomDropsTheLargerValuesOfItsAxisForTheSameOtherValues) {
  const auto spec = parse_sweep(std::string(kBase) + R"(
axes:
  batch_size: {values: [32, 128, 512, 2048], until: oom}
  ranks_per_node: [1, 2]
repeat: 2
)");
  const auto coords = ladder_coords();
  // Point 10 is batch 512 (index 2), 2 ranks (index 1), repeat 0.
  ASSERT_EQ(coords[10], (std::vector<int64_t>{2, 1}));
  const auto dropped = dropped_after_oom(spec.axes, coords, 10);
  ASSERT_EQ(dropped.size(), 2u);  // batch 2048 with 2 ranks, both repeats
  EXPECT_EQ(dropped[0].index, 14);
  EXPECT_EQ(dropped[1].index, 15);
  EXPECT_EQ(dropped[0].reason, "oom at batch_size 512");
  // The same OOM on an axis without `until` drops nothing.
  auto no_until = spec.axes;
  no_until[0].until_oom = false;
  EXPECT_TRUE(dropped_after_oom(no_until, coords, 10).empty());
  // The largest value drops nothing further.
  EXPECT_TRUE(dropped_after_oom(spec.axes, coords, 12).empty());
}

TEST(Sweep, NumbersReadTheSameWhateverTheProcessLocale) {
  // Qt sets the C locale from the environment; a decimal comma must not make
  // "0.005" text.
  const std::string previous = std::setlocale(LC_ALL, nullptr);
  if (!std::setlocale(LC_ALL, "de_DE.UTF-8") && !std::setlocale(LC_ALL, "de_DE.utf8"))
    GTEST_SKIP() << "no de_DE locale on this machine to try";
  const auto points =
      expand_sweep(parse_sweep(std::string(kBase) + "axes: {optimizer.lr: [0.005]}"));
  std::setlocale(LC_ALL, previous.c_str());
  ASSERT_FALSE(points.at(0).refused()) << points[0].problems.front();
  EXPECT_DOUBLE_EQ(config_of(points[0])["optimizer"]["lr"].get<double>(), 0.005);
}

}  // namespace
}  // namespace flotilla
