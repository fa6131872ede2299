#pragma once
// Nodes as a person manages them, for the CLI and the window alike: what a
// node may be stored as, probing nodes (in parallel, each on its own thread)
// and what a probe found, and whether a config fits the nodes it names.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/controller/connect_options.h"
#include "flotilla/controller/store.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/messages.h"

namespace flotilla::controller {

// One "field: what is wrong" line per problem; empty when `node` may be stored.
// Names, hosts, users and tags are restricted to characters that are safe in
// file names and command lines; everything sent to a shell is quoted anyway.
std::vector<std::string> validate_node(const NodeRow& node);

// A stored probe (NodeRow::probe_json), read back; nothing when there is
// none or it cannot be read.
std::optional<protocol::ProbeReply> parse_probe(const std::string& probe_json);
// The probe as one line of `nodes list`: "8 CPUs, 31.2 GiB memory, ...".
// A SLURM login node's probe adds its cluster: slurm_summary.
std::string probe_summary(const std::string& probe_json);
// "SLURM 22.05.8: debug* 3 nodes (3 idle, no GPU)", default partition starred.
std::string slurm_summary(const protocol::SlurmInfo& slurm);

struct ProbeOutcome {
  std::string node;
  bool reached = false;    // the agent answered; its answer is stored
  std::string probe_json;  // the answer, when reached
  std::string error;       // why not, in words, when not reached
  // A host key that stopped the probe: unknown (a person may trust it after
  // comparing the fingerprint) or changed (always refused).
  std::optional<HostKeyError::Kind> host_key;
  std::string fingerprint;
  std::string deployed;  // what the deploy did: "already there" or what was uploaded
  // The node's own engine (when the bundle's cannot use its LibTorch or
  // GPUs): what to store as its engine ("" : the bundle's again), unset
  // when unchanged; or why it could not be built.
  std::optional<std::string> engine_json;
  std::string engine_error;
};

// A line of a node's engine build as it comes: (node, line).
using ProbeProgress = std::function<void(const std::string&, const std::string&)>;

// Connects to each node at once (SSH for all but `local`), deploys the agent
// bundle if needed, starts the agent, asks what its node is and stores the
// answer; where the bundled engine cannot use the node's LibTorch (--torch)
// or GPUs, builds the node's own engine there, once, its output going to
// `on_progress` line by line. `on_each` is called on the probing node's own thread as soon as
// that node is done; the call returns once every node is. Unknown names are
// outcomes with their error, not throws. Blocking: the window calls it off
// its GUI thread.
std::vector<ProbeOutcome> probe_nodes(Store& store, const std::vector<std::string>& names,
                                      const ConnectOptions& options,
                                      const std::function<void(const ProbeOutcome&)>& on_each = {},
                                      const ProbeProgress& on_progress = {});

// Which engine runs on the node, for `nodes list` and the nodes view:
// "bundled", "installed (agent-path)", or "built against LibTorch 2.5.1
// (CUDA)" with its LibTorch.
std::string engine_summary(const NodeRow& node);

// What stops `config` from running on the nodes it names, one "nodes: ..."
// line each (the designer shows them at its Nodes field, start_run refuses
// with them): a node that is not among `nodes`, `local` beside other nodes,
// data files missing on this machine for a local run, and, with device cuda,
// a probed node with fewer GPUs than the ranks it would run.
std::vector<std::string> placement_problems(const ExperimentConfig& config,
                                            const std::vector<NodeRow>& nodes);

}  // namespace flotilla::controller
