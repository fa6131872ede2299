// The table of config keys against what the parser accepts and what
// docs/config.md describes: a key that one of them knows and another does
// not fails here, by name.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "flotilla/protocol/config_keys.h"
#include "flotilla/protocol/experiment_config.h"

namespace flotilla {
namespace {

using nlohmann::json;

constexpr const char* kProbe = "zz_probe";

std::vector<std::string> problems_of(const json& document) {
  try {
    parse_experiment(document.dump(), "probe");
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

// The keys the parser lists as allowed where `document` has the probe key at
// `path` ("" for the top level, "optimizer.", "freeze.schedule[0]."); empty
// when it does not complain about the probe there (not a mapping).
std::vector<std::string> allowed_at(const json& document, const std::string& path) {
  const std::string lead = path + kProbe + ": unknown key; allowed: ";
  for (const auto& problem : problems_of(document)) {
    if (problem.rfind(lead, 0) != 0) continue;
    std::vector<std::string> keys;
    std::istringstream list(problem.substr(lead.size()));
    std::string key;
    while (std::getline(list, key, ',')) keys.push_back(key.substr(key.find_first_not_of(' ')));
    return keys;
  }
  return {};
}

// Walks the parser's own "unknown key; allowed: ..." answers down every
// mapping and list of mappings: the keys it accepts, dotted as the table
// writes them.
void discover(const std::function<json(json)>& wrap, const std::string& path,
              std::set<std::string>& keys) {
  for (const auto& key : allowed_at(wrap(json{{kProbe, 1}}), path)) {
    const std::string dotted = path + key;
    auto as_mapping = [&](json inner) { return wrap(json{{key, std::move(inner)}}); };
    auto as_list = [&](json inner) { return wrap(json{{key, json::array({std::move(inner)})}}); };
    if (!allowed_at(as_mapping(json{{kProbe, 1}}), dotted + ".").empty()) {
      discover(as_mapping, dotted + ".", keys);
    } else if (!allowed_at(as_list(json{{kProbe, 1}}), dotted + "[0].").empty()) {
      keys.insert(dotted);
      std::set<std::string> fields;
      discover(as_list, dotted + "[0].", fields);
      for (const auto& f : fields) keys.insert(dotted + "[]." + f.substr(dotted.size() + 4));
    } else {
      keys.insert(dotted);
    }
  }
}

std::set<std::string> parser_keys() {
  std::set<std::string> keys;
  discover([](json inner) { return inner; }, "", keys);
  return keys;
}

TEST(ConfigKeys, TheParserIsAskedForItsKeysAndAnswersWithEveryLevel) {
  const auto keys = parser_keys();
  // A sample of each kind the walk must find: top level, nested, list entries.
  for (const char* key : {"name", "optimizer.lr", "vit.preset", "synthetic.shape",
                          "freeze.schedule", "freeze.schedule[].at_step"})
    EXPECT_TRUE(keys.count(key)) << key;
  EXPECT_FALSE(keys.count("optimizer")) << "a mapping is not a key of its own";
}

TEST(ConfigKeys, EveryKeyTheParserAcceptsHasADescription) {
  for (const auto& key : parser_keys()) {
    const ConfigKey* row = find_config_key(key);
    ASSERT_TRUE(row) << "the parser accepts \"" << key
                     << "\" but config_keys.cpp has no row describing it";
    EXPECT_FALSE(row->description.empty()) << key;
    EXPECT_FALSE(row->allowed.empty()) << key;
  }
}

TEST(ConfigKeys, EveryRowIsAKeyTheParserAccepts) {
  const auto keys = parser_keys();
  for (const auto& row : config_keys())
    EXPECT_TRUE(keys.count(row.key))
        << "config_keys.cpp describes \"" << row.key << "\", which the parser does not accept";
}

TEST(ConfigKeys, DocsConfigMdDescribesEveryKey) {
  std::ifstream in(std::string(FLOTILLA_DOCS_DIR) + "/config.md");
  ASSERT_TRUE(in) << FLOTILLA_DOCS_DIR << "/config.md cannot be read";
  std::stringstream text;
  text << in.rdbuf();
  for (const auto& row : config_keys())
    EXPECT_NE(text.str().find("`" + row.key + "`"), std::string::npos)
        << "docs/config.md does not describe `" << row.key << "`";
}

TEST(ConfigKeys, ChoicesAreTheParsersSpellingsAndDefaultsTheDefaultConfigs) {
  for (const auto& row : config_keys()) {
    if (row.type != ConfigKeyType::choice) continue;
    ASSERT_FALSE(row.choices.empty()) << row.key;
    // Every spelling parses (under a config where the key applies).
    for (const auto& choice : row.choices) {
      const auto problems =
          problems_of(row.key.find('.') == std::string::npos
                          ? json{{row.key, choice}}
                          : json{{row.key.substr(0, row.key.find('.')),
                                  {{row.key.substr(row.key.find('.') + 1), choice}}}});
      for (const auto& p : problems)
        EXPECT_EQ(p.find(": unknown value"), std::string::npos) << row.key << "=" << choice << p;
    }
  }
  EXPECT_EQ(find_config_key("optimizer.lr")->default_text, "0.01");
  EXPECT_EQ(find_config_key("synthetic.shape")->default_text, "[3, 32, 32]");
  EXPECT_EQ(find_config_key("nodes")->default_text, "[local]");
  EXPECT_EQ(find_config_key("schedule")->default_text, "gpipe");
  EXPECT_EQ(find_config_key("freeze.schedule[3].blocks"),
            find_config_key("freeze.schedule[].blocks"));
  EXPECT_EQ(find_config_key("optimizer"), nullptr);
}

TEST(ConfigKeys, GroupsApplyAsTheStrategyAndModelMakeThem) {
  ExperimentConfig config;
  EXPECT_FALSE(key_applies(*find_config_key("chunks"), config));
  EXPECT_FALSE(key_applies(*find_config_key("vit.depth"), config));
  EXPECT_TRUE(key_applies(*find_config_key("optimizer.lr"), config));
  config.strategy = Strategy::pipeline_ddp;
  config.model = ModelKind::vit;
  EXPECT_TRUE(key_applies(*find_config_key("chunks"), config));
  EXPECT_TRUE(key_applies(*find_config_key("replicas"), config));
  EXPECT_TRUE(key_applies(*find_config_key("vit.depth"), config));
  EXPECT_FALSE(key_applies(*find_config_key("compression.bits"), config));
  config.compression.method = CompressionMethod::sort_quant;
  EXPECT_TRUE(key_applies(*find_config_key("compression.split_bits"), config));
}

// Every message of a set of bad configs names a key of the table, so the
// designer can put each one at its field.
TEST(ConfigKeys, ValidatorMessagesNameTheirKey) {
  const char* bad[] = {
      "{batch_size: 0, epochs: 0, max_steps: -1, threads: -1, bucket_mb: 0}",
      "{strategy: pipeline, ranks_per_node: 2, balance: [1, 1], chunks: 0}",
      "{strategy: pipeline_ddp, ranks_per_node: 4, replicas: 3}",
      "{optimizer: {lr: 0, momentum: 1.5, weight_decay: -1}, dropout: 1}",
      "{lr_schedule: {name: step, gamma: 0, step_epochs: 0, warmup_steps: -1}}",
      "{freeze: {method: fixed, schedule: [{at_step: 5, blocks: 9}]}}",
      "{freeze: {method: auto, alpha: 0, check_every: 0, tolerance: 1}}",
      "{strategy: pipeline, ranks_per_node: 2, compression: {method: sort_quant, bits: 0, "
      "split_bits: 20}}",
      "{model: vit, vit: {patch: 5, heads: 3, preset: huge}}",
      "{model: transformer_encoder, dataset: synthetic, synthetic: {vocab: 100, shape: [600]}, "
      "transformer: {vocab: 10, max_positions: 4, heads: 5}}",
      "{dataset: synthetic, synthetic: {shape: [0], classes: 1, vocab: -1}}",
      "{nodes: [a, a], name: '', strategy: single, ranks_per_node: 2}",
      "{zz_unknown: 1, optimizer: {zz_other: 2}}",
  };
  for (const char* yaml : bad) {
    std::vector<std::string> problems;
    try {
      parse_experiment(yaml, "test");
    } catch (const ConfigError& e) {
      problems = e.problems();
    }
    ASSERT_FALSE(problems.empty()) << yaml;
    for (const auto& p : problems) {
      if (p.find(": unknown key;") != std::string::npos) {
        EXPECT_EQ(key_of_message(p), "") << "an unknown key has no field: " << p;
        continue;
      }
      EXPECT_NE(key_of_message(p), "") << "no key of the table in: " << p;
    }
  }
  EXPECT_EQ(key_of_message("freeze.schedule[1].blocks: must grow"), "freeze.schedule[1].blocks");
  EXPECT_EQ(key_of_message("form: line 3, column 1: bad indentation"), "");
}

TEST(ConfigKeys, ADiffListsOnlyTheKeysThatDiffer) {
  ExperimentConfig a, b;
  b.optimizer.lr = 0.1;
  b.balance = {3, 7};
  b.strategy = Strategy::pipeline;
  const auto diff = diff_experiments(a, b);
  ASSERT_EQ(diff.size(), 3u);
  EXPECT_EQ(diff[0].key, "strategy");
  EXPECT_EQ(diff[0].left, "single");
  EXPECT_EQ(diff[0].right, "pipeline");
  EXPECT_EQ(diff[1].key, "balance");
  EXPECT_EQ(diff[1].left, "[]");
  EXPECT_EQ(diff[1].right, "[3, 7]");
  EXPECT_EQ(diff[2].key, "optimizer.lr");
  EXPECT_EQ(diff[2].right, "0.1");
  EXPECT_TRUE(diff_experiments(a, a).empty());
  // A key written out as its default is the same as one left out.
  EXPECT_TRUE(diff_experiments(parse_experiment("{name: experiment}"),
                               parse_experiment("{name: experiment, optimizer: {lr: 0.01}}"))
                  .empty());
  b = a;
  b.freeze.method = FreezeMethod::fixed;
  b.freeze.schedule = {{10, 1}, {20, 2}};
  const auto freeze = diff_experiments(a, b);
  ASSERT_EQ(freeze.size(), 2u);
  EXPECT_EQ(freeze[1].key, "freeze.schedule");
  EXPECT_EQ(freeze[1].right, "[{at_step: 10, blocks: 1}, {at_step: 20, blocks: 2}]");
}

TEST(ConfigDocument, KeepsWhatAPersonWroteAndNamesASyntaxErrorsLine) {
  // Invalid values are kept as written: the validator names them later.
  const auto document = json::parse(
      config_document_from_text("name: x\noptimizer: {lr: -1}\nbatch_size: many\n", "yaml"));
  EXPECT_EQ(document["optimizer"]["lr"], -1);
  EXPECT_EQ(document["batch_size"], "many");
  EXPECT_EQ(json::parse(config_document_from_text("", "yaml")), json::object());
  try {
    config_document_from_text("name: x\noptimizer: [lr: 1\n", "the YAML tab");
    FAIL() << "a syntax error was accepted";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_EQ(e.problems()[0].rfind("the YAML tab: line ", 0), 0u) << e.problems()[0];
  }
  EXPECT_THROW(config_document_from_text("- a\n- b\n", "yaml"), ConfigError);
}

TEST(ConfigDocument, YamlFollowsTheTablesOrderAndReadsBackTheSame) {
  ExperimentConfig config;
  config.name = "ordered";
  config.optimizer.lr = 0.05;
  config.freeze.method = FreezeMethod::fixed;
  config.freeze.schedule = {{10, 1}};
  json document = json::parse(to_json(config));
  document["zz_unknown"] = 7;
  const std::string yaml = config_document_to_yaml(document.dump());
  EXPECT_LT(yaml.find("name:"), yaml.find("model:"));
  EXPECT_LT(yaml.find("model:"), yaml.find("dataset:"));
  EXPECT_LT(yaml.find("strategy:"), yaml.find("optimizer:"));
  EXPECT_LT(yaml.find("optimizer:"), yaml.find("device:"));
  EXPECT_LT(yaml.find("device:"), yaml.find("zz_unknown:"));
  EXPECT_EQ(json::parse(config_document_from_text(yaml, "yaml")), document);
}

TEST(ConfigDocument, ReadExperimentKeepsWhatItCouldReadAndListsEveryProblem) {
  std::vector<std::string> problems;
  const auto config = read_experiment(
      "{strategy: pipeline, model: vit, optimizer: {lr: abc}, batch_size: 0}", "form", problems);
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0], "optimizer.lr: expected a number, got \"abc\"");
  EXPECT_EQ(config.strategy, Strategy::pipeline);
  EXPECT_EQ(config.model, ModelKind::vit);
  const ExperimentConfig defaults;
  EXPECT_EQ(config.optimizer.lr, defaults.optimizer.lr);
  // Once every key reads, the validator's lines follow, as parse_experiment's.
  problems.clear();
  read_experiment("{batch_size: 0}", "form", problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "batch_size: must be a positive integer, got 0");
  problems.clear();
  read_experiment("name: [", "form", problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("form: line 1", 0), 0u) << problems[0];
}

}  // namespace
}  // namespace flotilla
