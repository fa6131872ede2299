#pragma once
// `flotilla nodes profile`'s run: a node times a config's blocks, optimizer
// and (with several ranks on it) how its ranks slow each other, as
// `flotilla-train --plan --predict` does, and sends the result back as one
// `profile` record between the usual start and end records
// (docs/predict.md, docs/records.md). Rank 0 times; the node's other ranks
// are there so that a rank's threads are what the run's will be, and end at
// once. Free of LibTorch headers.

#include <string>

#include "flotilla/engine/training.h"

namespace flotilla {

struct BlockProfileRunOptions {
  ExperimentConfig config;  // the run's config at the micro-batch, on this node
  DistributedEnv env;
  RecordSink* sink = nullptr;
  std::string profile_dir;    // this node's own profiles, replaced by the new one
  std::string engine_binary;  // this flotilla-train: ranks sharing cores are timed with it
};

struct BlockProfileRunResult {
  records::Outcome outcome = records::Outcome::finished;
  std::string message;
};

// Never throws: a failure ends as the result's outcome and an end record.
BlockProfileRunResult run_block_profile(const BlockProfileRunOptions& options);

}  // namespace flotilla
