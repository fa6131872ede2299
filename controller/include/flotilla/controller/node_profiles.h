#pragma once
// Block profiles of other machines: `flotilla nodes profile NODE RUN.yaml`
// runs flotilla-train --profile-blocks on NODE as a run of its own, whose
// rank 0 sends one `profile` record (docs/predict.md): the config's blocks,
// optimizer and core sharing as timed there. The node_profiles table
// (migration 0012) says which runs are profiles and of which node; the
// profile stays in the run's records. A prediction for runs on that node
// then takes the blocks' times from there instead of timing this machine.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"

namespace flotilla::controller {

struct NodeProfile {
  std::string run_id;
  std::string node;
  int64_t created_ms = 0;
  RunState state = RunState::created;  // the profile run's
  // The `profile` record's body as rank 0 sent it; empty until it has.
  std::string record_json;
};

void add_node_profile(Store& store, const std::string& run, const std::string& node,
                      int64_t created_ms);
// Every profile run, or those of `node`, newest first, with its record
// (without: record_json left empty, one query in all).
std::vector<NodeProfile> node_profiles(const Store& store,
                                       const std::optional<std::string>& node = {},
                                       bool with_records = true);

// The node's profiles a prediction can use: each finished run's record body
// with `node` added, only the newest of each config.
std::vector<std::string> usable_node_profiles(const Store& store, const std::string& node);
// Those as flotilla-train --node-profiles reads them, one JSON file each in
// `dir`. Returns how many were written.
int write_node_profiles(const std::vector<std::string>& profiles, const std::filesystem::path& dir);

// One line about a stored profile: when, the model and micro-batch, the
// threads, and its step's compute (forward, backward and optimizer).
std::string node_profile_line(const NodeProfile& profile);

}  // namespace flotilla::controller
