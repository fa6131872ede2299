#pragma once
// An nccl-tests-style all-reduce sweep over the engine's own communication
// layer: the ranks of a run rendezvous as training ranks do (torchrun's
// variables; Gloo on the CPU, NCCL on CUDA, the same interface choice), then
// time the all-reduce of every message size from min_bytes to max_bytes and
// emit one `bench` record per size between the usual start and end records
// (docs/allreduce_bench.md). Free of LibTorch headers.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "flotilla/engine/training.h"

namespace flotilla {

struct AllreduceBenchOptions {
  ExperimentConfig config;  // device, threads, and the world its nodes and ranks_per_node make
  DistributedEnv env;
  RecordSink* sink = nullptr;
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{256} << 20;
  int64_t step_factor = 2;        // each size is the previous one times this
  int64_t iterations = 20;        // timed operations per size
  int64_t warmup = 5;             // untimed operations before them
  std::ostream* table = nullptr;  // a table for people (rank 0 writes it), or none
};

// Problems with the sizes or counts, one "--option: ..." line each; empty when fine.
std::vector<std::string> allreduce_bench_problems(const AllreduceBenchOptions& options);

struct AllreduceBenchResult {
  records::Outcome outcome = records::Outcome::finished;
  std::string message;
  int64_t sizes = 0;  // message sizes timed
};

// Never throws: a failure ends as the result's outcome and an end record.
AllreduceBenchResult run_allreduce_bench(const AllreduceBenchOptions& options);

// "8", "64K", "256M", "1G" (binary multiples) as bytes; nullopt for anything else.
std::optional<int64_t> parse_byte_size(const std::string& text);

}  // namespace flotilla
