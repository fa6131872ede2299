#pragma once
// Every key of the experiment config described once: its dotted name, the
// group a person looks for it in, its type, default and allowed values, one
// sentence of what it does, and when it applies. The window builds its
// designer and tool tips from this table; docs/config.md is checked against
// it, and it against what the parser accepts, so that a new key cannot be
// added without a description.

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

enum class ConfigGroup {
  experiment,   // name, length of the run, seed
  model,        // which network and its sizes
  data,         // data set, batch
  strategy,     // strategy and placement: nodes, ranks, replicas, buckets
  pipeline,     // stages, micro-batches, schedule
  freezing,     // progressive layer freezing
  compression,  // activation codec at stage boundaries
  optimizer,    // optimizer and learning-rate schedule
  device,       // device and limits
};
// Every group, in the order the designer shows them.
const std::vector<ConfigGroup>& config_groups();
std::string_view name_of(ConfigGroup group);  // "Optimizer and schedule"

enum class ConfigKeyType {
  text,
  integer,
  unsigned_integer,
  number,
  boolean,
  choice,        // one of `choices`
  integer_list,  // [3, 7]
  name_list,     // [a, b], or one name
  mapping_list,  // a list of mappings whose keys are rows "KEY[].FIELD"
};

struct ConfigKey {
  // Dotted: "optimizer.lr". The fields of a mapping list's entries are
  // "freeze.schedule[].at_step".
  std::string key;
  ConfigGroup group = ConfigGroup::experiment;
  ConfigKeyType type = ConfigKeyType::text;
  std::vector<std::string> choices;  // type choice: every allowed spelling
  std::string default_text;          // as the YAML export writes it; empty: none
  std::string allowed;               // what the validator accepts, in words
  std::string description;           // one sentence
  std::string applies_when;          // in words; empty: every config
  // Whether the key has any effect on `config`; null: always.
  bool (*applies)(const ExperimentConfig& config) = nullptr;

  bool is_list_field() const { return key.find("[]") != std::string::npos; }
  // "freeze.schedule" for "freeze.schedule[].blocks"; the key itself otherwise.
  std::string list_key() const { return key.substr(0, key.find("[]")); }
};

// Every key, grouped and in the designer's order within a group.
const std::vector<ConfigKey>& config_keys();
// The row of `key` ("optimizer.lr", "freeze.schedule[2].blocks"), or null.
const ConfigKey* find_config_key(std::string_view key);
bool key_applies(const ConfigKey& key, const ExperimentConfig& config);

// The dotted key a validator or parser message is about ("optimizer.lr:
// must be positive" -> "optimizer.lr", "freeze.schedule[1].blocks: ..." ->
// "freeze.schedule[1].blocks"); empty when the message names no key of the
// table (a YAML syntax error, "config: expected a mapping").
std::string key_of_message(std::string_view message);

// One key whose value differs between two experiments, both values written
// as YAML's flow style ("0.1", "[3, 7]", "resnet18").
struct ConfigDifference {
  std::string key;
  std::string left, right;
};
// The keys whose values differ, in the table's order. Defaults count as
// values: a key one side leaves out and the other sets to its default is
// not a difference.
std::vector<ConfigDifference> diff_experiments(const ExperimentConfig& left,
                                               const ExperimentConfig& right);

// An experiment as a person wrote it, before validation: the JSON text of a
// YAML or JSON document. Throws ConfigError with the line and column of a
// syntax error; any mapping is accepted, however wrong its values.
std::string config_document_from_text(std::string_view text, std::string_view source);
// The YAML of a JSON document (valid or not), its keys in the table's order
// (the designer's), unknown keys after them.
std::string config_document_to_yaml(std::string_view json_text);

}  // namespace flotilla
