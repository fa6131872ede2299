#pragma once
// The wire protocol between controller and agent: one JSON object a line, each
// with `v` (protocol version) and `type`. Plain structs; encode/decode here.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace flotilla::protocol {

inline constexpr int kVersion = 1;
// A line longer than this is malformed (and skipped), never buffered whole.
inline constexpr size_t kMaxLineBytes = 16u << 20;

struct Hello {
  std::string role;  // "controller" or "agent"
  std::string software;
  std::vector<std::string> capabilities;
  int version = kVersion;
};

// What a run's ranks do. `allreduce_bench` is `flotilla nodes bench`: the
// ranks run `flotilla-train --allreduce-bench`, an all-reduce size sweep,
// instead of training. Only an agent whose hello lists the capability
// kAllreduceBenchCapability understands it; the controller asks no other
// (an older agent would ignore the mode and train). `block_profile` is
// `flotilla nodes profile`: rank 0 runs `flotilla-train --profile-blocks`,
// timing the config's blocks on its node; only for an agent that lists
// kBlockProfileCapability.
enum class RunMode { train, allreduce_bench, block_profile };
std::string_view name_of(RunMode mode);
inline constexpr const char* kAllreduceBenchCapability = "allreduce-bench";
inline constexpr const char* kBlockProfileCapability = "block-profile";

// The sweep's limits; 0 leaves each to the engine's default.
struct BenchOptions {
  int64_t min_bytes = 0;
  int64_t max_bytes = 0;
  int64_t iterations = 0;
  int64_t warmup = 0;
};

struct StartRun {
  std::string run;
  std::string node = "local";
  std::string config_json;     // the ExperimentConfig as JSON
  std::vector<int64_t> ranks;  // global ranks this node runs, one process each
  int64_t world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Sent only when not `train`, so that a training start reads as it always did.
  RunMode mode = RunMode::train;
  BenchOptions bench;
  // A new attempt of an ended run in its run directory: the ranks go on from
  // their newest checkpoint (flotilla-train --resume), the spool goes on with
  // its numbering. Sent only when true.
  bool resume = false;
};

// The capability of an agent that takes StartRun's `resume`.
inline constexpr const char* kResumeRunCapability = "resume-run";

// The words of a node's `killed` end when a person asked for the stop.
inline constexpr const char* kStoppedOnRequest = "stopped on request";

// The longest grace between SIGTERM and SIGKILL that a stop may ask for.
inline constexpr double kMaxGraceSeconds = 3600;

struct StopRun {
  std::string run;
  double grace_s = 5.0;  // SIGTERM, then SIGKILL after this; 0..kMaxGraceSeconds
  // Why the controller stops it, when not on a person's request (another
  // node failed): the node's end says so instead of kStoppedOnRequest.
  std::string why;
};

struct StatusRequest {
  std::string run;
};

// Asks for every stored record of `run` after `after_seq`, then the live ones.
struct Resume {
  std::string run;
  int64_t after_seq = 0;
};

struct Started {
  std::string run;
  std::vector<int64_t> pids;
};

struct Record {
  std::string run;
  int64_t seq = 0;
  std::string node;
  int64_t rank = 0;         // -1: the agent's own system metrics
  std::string record_json;  // a JSON object, verbatim (checked by whoever produced it)
  // The record's own "type" (step, epoch, ...), read by decode() while it has
  // the object parsed anyway, so receivers need not parse it again. Not sent
  // apart from record_json.
  std::string record_type;
};

struct RunEnd {
  std::string run;
  int64_t seq = 0;
  std::string outcome;  // finished, failed, killed, oom
  std::string message;
};

struct StatusReply {
  std::string run;
  std::string state;  // running, or the outcome
  int64_t last_seq = 0;
  std::vector<int64_t> live_pids;
};

struct Error {
  std::string message;
  std::string run;  // the run a failed request was about; empty when none
};

// Asks the agent what its node is: the controller stores the answer.
struct Probe {
  // Also ask the login node's SLURM for its cluster (sinfo): only for SLURM
  // nodes, since elsewhere an installed but unconfigured sinfo only errs.
  bool slurm = false;
};

struct GpuInfo {
  int64_t index = 0;
  std::string name;
  int64_t memory_bytes = 0;
};

// A SLURM cluster as its login node's `sinfo` sees it.
struct SlurmNodeInfo {
  std::string name;
  std::string state;  // sinfo's %T: idle, allocated, mixed, down*, drained, ...
  int64_t cpus = 0;
  int64_t gpus = 0;  // from its gres (gpu:4, gpu:a100:4(S:0-1)); 0 without
  std::string gres;  // as sinfo says it, "" for none
};

struct SlurmPartitionInfo {
  std::string name;
  bool is_default = false;
  bool up = true;
  std::string time_limit;          // sinfo's %l: infinite, 1-00:00:00, ...
  std::vector<std::string> nodes;  // node names, expanded; a node may be in several
};

struct SlurmInfo {
  std::string version;  // "22.05.8"
  std::string error;    // sinfo could not reach slurmctld, or another failure
  std::vector<SlurmPartitionInfo> partitions;
  std::vector<SlurmNodeInfo> nodes;
};

struct ProbeReply {
  std::string os;      // PRETTY_NAME of /etc/os-release
  std::string kernel;  // uname -sr
  std::string hostname;
  int64_t cpus = 0;
  int64_t memory_bytes = 0;
  int64_t disk_free_bytes = 0;  // where the agent keeps its runs
  int free_port = 0;            // a TCP port free on this node a moment ago, for a rendezvous
  std::vector<GpuInfo> gpus;    // through NVML, empty without a driver
  // Where SLURM's client commands are installed (a login node): its cluster.
  std::optional<SlurmInfo> slurm;
};

using Message = std::variant<Hello, StartRun, StopRun, StatusRequest, Resume, Started, Record,
                             RunEnd, StatusReply, Error, Probe, ProbeReply>;

class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string encode(const Message& message);  // one line, without the newline
// Throws DecodeError saying what is wrong: not JSON, a missing or mistyped
// field, an unknown type, another protocol version.
Message decode(std::string_view line);
std::string_view type_of(const Message& message);

}  // namespace flotilla::protocol
