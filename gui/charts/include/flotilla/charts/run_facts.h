#pragma once
// A run's details as text, for the dashboard's Details tab: the config as
// YAML, every state transition with its time and reason, the nodes and
// ranks, the summary numbers and what could not be read.

#include <string>
#include <utility>
#include <vector>

#include "flotilla/charts/run_data.h"

namespace flotilla::charts {

struct RunFacts {
  std::string title;        // "20261123-085322-f461 (charts-ddp): finished"
  std::string config_yaml;  // or the stored JSON, with why, when it no longer parses
  struct Transition {
    std::string state, at, reason;
  };
  std::vector<Transition> transitions;
  struct Node {
    std::string node, host, ranks, gpus, last_record, records;
  };
  std::vector<Node> nodes;
  std::vector<std::pair<std::string, std::string>> summary;  // what, value
  std::vector<std::string> skipped;  // "3 step records without a numeric "step""
};

RunFacts facts_of(const RunData& run);

// Local time of `seconds` since the Unix epoch: "2026-11-23 08:56:32".
std::string local_time_text(double seconds);

}  // namespace flotilla::charts
