#pragma once
// A machine's profile of one model's blocks at one micro-batch: what a
// prediction timed (docs/predict.md), kept in a file so that the next
// prediction of the same blocks on the same machine reuses it instead of
// timing them again (an edit of the nodes, the schedule or the learning
// rate predicts at once). Keyed by everything that can change a block's
// time: the config without what cannot (names, nodes, layout, lengths), the
// micro-batch, the threads, the machine and LibTorch.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/protocol/experiment_config.h"
#include "pipeline/elastic_plan.h"
#include "plan/memory_prediction.h"

namespace flotilla {

struct BlockProfile {
  std::vector<BlockCost> costs;  // per block: forward, forward + backward
  // Per block, its tensors at the micro-batch (memory_prediction.h); and the
  // whole model's gradients and optimizer state, bytes.
  std::vector<predict::BlockMemory> block_memory;
  int64_t gradient_bytes = 0, optimizer_state_bytes = 0;
  int64_t evaluation_batch = 0;  // the samples the evaluation's peaks were counted on
  // On the CPU: what training makes resident besides tensors (BLAS and
  // oneDNN buffers, memory glibc keeps), as the passes did here.
  int64_t runtime_bytes = 0;
  double optimizer_ms = 0;
  int64_t measured_ms = 0;  // when, ms since the epoch
  // A pass's slowdown with n passes at once on this machine, n = 1, 2, ...
  // (core_sharing.h); measured as far as a prediction has needed.
  std::vector<double> core_sharing;
  // How: "processes" (one-rank trainings at once, process_sharing.h) or
  // "threads" (core_sharing.h); a prediction that can use processes measures
  // a profile's "threads" figures again.
  std::string core_sharing_by;
};

// The profile's file name: a hash of what it depends on.
std::string profile_key(const ExperimentConfig& config, int64_t micro_batch, int64_t threads);

// The key of a profile measured on a node for a config (`flotilla nodes
// profile`): what profile_key hashes but the machine, which is the node's.
std::string node_profile_key(const ExperimentConfig& config, int64_t micro_batch, int64_t threads);

// A profile as JSON text, and back; nothing when the text is not one of
// `blocks` blocks.
std::string block_profile_json(const BlockProfile& profile);
std::optional<BlockProfile> parse_block_profile(const std::string& text, size_t blocks);

// The body of the `profile` record flotilla-train --profile-blocks writes
// (docs/records.md): node_profile_key, the micro-batch, threads and cores
// it was timed with, this host, LibTorch, and the profile.
std::string node_profile_record(const ExperimentConfig& config, int64_t micro_batch,
                                int64_t threads, const BlockProfile& profile);

// A node's profile for `config` at `micro_batch` among the `profile` record
// bodies in `dir` (one JSON file each, with the node's name added as
// `node`): the one of `node` whose key matches with the threads a rank of
// `config` gets on its cores. Nothing when none does; `why_none` then says
// what `dir` holds of the node.
std::optional<BlockProfile> find_node_profile(const std::filesystem::path& dir,
                                              const std::string& node,
                                              const ExperimentConfig& config, int64_t micro_batch,
                                              size_t blocks, std::string& why_none);

// The profile under `key` in `dir`; nothing when there is none or it does not
// read as one (it is measured again and overwritten).
std::optional<BlockProfile> load_block_profile(const std::filesystem::path& dir,
                                               const std::string& key, size_t blocks);
// Written whole or not at all (a temporary file renamed); a directory that
// cannot be written leaves the prediction without a profile, not failed.
void save_block_profile(const std::filesystem::path& dir, const std::string& key,
                        const BlockProfile& profile);

}  // namespace flotilla
