// libFuzzer target: an experiment config (YAML, or JSON read as YAML) through
// the parser the CLI, window and engine share. A config that parses must
// write out as JSON and YAML that parse back.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "flotilla/protocol/experiment_config.h"

using namespace flotilla;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> problems;
  read_experiment(text, "fuzz", problems);  // never throws, whatever the text
  ExperimentConfig config;
  try {
    config = parse_experiment(text, "fuzz");
  } catch (const ConfigError&) {
    return 0;  // refused with "key: what is wrong" lines
  }
  parse_experiment(to_json(config),
                   "fuzz json");  // throws (and so fails) if it wrote what it refuses
  parse_experiment(to_yaml(config), "fuzz yaml");
  return 0;
}
