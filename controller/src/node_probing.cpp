// Probing nodes and checking a config against them: the public face of
// node_access and node_connection, shared by `flotilla nodes probe`, the
// window's nodes view and start_run.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <future>

#include "agent_bundle.h"
#include "engine_on_node.h"
#include "flotilla/controller/nodes.h"
#include "flotilla/controller/paths.h"
#include "node_access.h"
#include "node_connection.h"

namespace flotilla::controller {
namespace {

// Builds the node's own engine when the bundle's cannot serve it
// (engine_on_node.h), or finds it built; says what in `out`.
void build_own_engine(const NodeRow& node, const protocol::ProbeReply& probe,
                      const ConnectOptions& options, NodeConnection& connection, ProbeOutcome& out,
                      const ProbeProgress& progress) {
  const auto agent_binary =
      options.agent_binary.empty() ? sibling_program("flotilla-agent") : options.agent_binary;
  // Only a node with GPUs asks what the bundle's engine links: ldd of it.
  const bool bundle_has_cuda =
      !probe.gpus.empty() &&
      AgentBundle::beside(agent_binary).library("libtorch_cuda.so").has_value();
  const auto reason = own_engine_reason(node, probe, bundle_has_cuda);
  if (reason.empty()) {
    if (!node.engine_json.empty()) out.engine_json = "";  // back to the bundle's
    return;
  }
  try {
    const auto source = EngineSource::beside(agent_binary);
    if (progress) progress(node.name, "engine: " + reason + "; building it there if not built");
    out.engine_json = connection.build_engine(source.tarball, source.hash, node.torch_prefix,
                                              [&](const std::string& line) {
                                                if (progress) progress(node.name, line);
                                              });
  } catch (const std::exception& e) {
    out.engine_error = e.what();
  }
}

ProbeOutcome probe_one(const NodeRow& node, const ConnectOptions& options,
                       const ProbeProgress& progress) {
  ProbeOutcome out;
  out.node = node.name;
  try {
    auto connection = NodeConnection::open(node, options);
    // start_agent deploys first; what it did is its last_deploy.
    const auto probe = probe_agent(node.name, connection->start_agent(), options.timeout,
                                   node.kind == NodeKind::slurm);
    const auto& deployed = connection->last_deploy();
    if (node.kind == NodeKind::slurm && (!probe.slurm || !probe.slurm->error.empty())) {
      out.error = !probe.slurm
                      ? "a SLURM node, but sinfo is not on the PATH of " + node.host +
                            "'s logins (is it the cluster's login node, with slurm-client?)"
                      : "a SLURM node, but " + probe.slurm->error;
      return out;
    }
    out.probe_json = probe_to_json(probe);
    out.reached = true;
    if (!node.is_local())
      out.deployed = "bundle " + deployed.bundle_dir + ": " +
                     (deployed.files_uploaded == 0
                          ? std::string("already there, nothing uploaded")
                          : std::to_string(deployed.files_uploaded) + " files, " +
                                std::to_string(deployed.bytes_uploaded) + " bytes uploaded");
    if (!deployed.replaced.empty()) out.deployed += " (" + deployed.replaced + ")";
    build_own_engine(node, probe, options, *connection, out, progress);
  } catch (const HostKeyError& e) {
    out.error = e.what();
    out.host_key = e.kind();
    out.fingerprint = e.fingerprint();
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

std::string gpu_count(size_t n) {
  return n == 0 ? "no GPU" : std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
}

}  // namespace

std::optional<protocol::ProbeReply> parse_probe(const std::string& probe_json) {
  if (probe_json.empty()) return std::nullopt;
  auto j = nlohmann::json::parse(probe_json, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  // Stored without the envelope (probe_to_json): put it back and decode as the wire does.
  j["v"] = protocol::kVersion;
  j["type"] = "probe_reply";
  try {
    const auto message = protocol::decode(j.dump());
    if (const auto* reply = std::get_if<protocol::ProbeReply>(&message)) return *reply;
  } catch (const protocol::DecodeError&) {
  }
  return std::nullopt;
}

std::vector<ProbeOutcome> probe_nodes(Store& store, const std::vector<std::string>& names,
                                      const ConnectOptions& options,
                                      const std::function<void(const ProbeOutcome&)>& on_each,
                                      const ProbeProgress& on_progress) {
  // Every node at once: probing N nodes costs about one node's time.
  std::vector<std::future<ProbeOutcome>> probing;
  for (const auto& name : names) {
    const auto node = store.node(name);
    probing.push_back(
        std::async(std::launch::async, [&store, node, name, options, &on_each, &on_progress] {
          ProbeOutcome out;
          if (!node) {
            out.node = name;
            out.error = "no node \"" + name + "\" in " + store.path().toStdString();
          } else {
            out = probe_one(*node, options, on_progress);
            if (out.reached) store.save_probe(name, out.probe_json);
            if (out.engine_json) store.save_engine(name, *out.engine_json);
          }
          if (on_each) on_each(out);
          return out;
        }));
  }
  std::vector<ProbeOutcome> outcomes;
  for (auto& p : probing) outcomes.push_back(p.get());
  return outcomes;
}

namespace {

// A run on a SLURM login node: one such node alone, and a slurm section.
void slurm_placement_problems(const ExperimentConfig& config, const std::vector<NodeRow>& nodes,
                              std::vector<std::string>& problems) {
  std::vector<const NodeRow*> slurm_nodes;
  for (const auto& name : config.nodes)
    for (const auto& n : nodes)
      if (n.name == name && n.kind == NodeKind::slurm) slurm_nodes.push_back(&n);
  if (slurm_nodes.empty()) {
    if (config.slurm.enabled())
      problems.push_back(
          "slurm.nodes: a SLURM run names one SLURM login node in nodes "
          "(flotilla nodes add NAME --slurm ...), got " +
          join_list(config.nodes));
    return;
  }
  const NodeRow& login = *slurm_nodes.front();
  if (config.nodes.size() > 1) {
    problems.push_back("nodes: \"" + login.name +
                       "\" is a SLURM login node; a run on it names it alone (its job takes "
                       "slurm.nodes of the cluster's nodes), got " +
                       join_list(config.nodes));
    return;
  }
  if (!config.slurm.enabled()) {
    problems.push_back("nodes: \"" + login.name +
                       "\" is a SLURM login node: say how many of its cluster's nodes the run "
                       "takes with slurm: {nodes: N}");
    return;
  }
  // What the last probe knows of the partition the job would be queued in.
  if (const auto probe = parse_probe(login.probe_json); probe && probe->slurm) {
    const std::string wanted =
        !config.slurm.partition.empty() ? config.slurm.partition : login.slurm_partition;
    const protocol::SlurmPartitionInfo* partition = nullptr;
    for (const auto& p : probe->slurm->partitions)
      if (wanted.empty() ? p.is_default : p.name == wanted) partition = &p;
    if (!partition && !wanted.empty()) {
      std::vector<std::string> names;
      for (const auto& p : probe->slurm->partitions) names.push_back(p.name);
      problems.push_back("slurm.partition: \"" + wanted + "\" is not a partition of " + login.name +
                         "'s cluster (its partitions: " + join_list(names) + ")");
    } else if (partition && config.slurm.nodes > static_cast<int64_t>(partition->nodes.size())) {
      problems.push_back("slurm.nodes: " + std::to_string(config.slurm.nodes) + ", but partition " +
                         partition->name + " of " + login.name + " has " +
                         std::to_string(partition->nodes.size()) + " nodes");
    }
  }
}

}  // namespace

std::vector<std::string> placement_problems(const ExperimentConfig& config,
                                            const std::vector<NodeRow>& nodes) {
  std::vector<std::string> problems;
  slurm_placement_problems(config, nodes, problems);
  std::vector<std::string> known;
  for (const auto& n : nodes) known.push_back(n.name);
  for (const auto& name : config.nodes) {
    const auto node =
        std::find_if(nodes.begin(), nodes.end(), [&](const NodeRow& n) { return n.name == name; });
    if (node == nodes.end()) {
      problems.push_back("nodes: \"" + name + "\" is not a known node (known: " + join_list(known) +
                         ")");
      continue;
    }
    // An engine built on the node from other sources or another LibTorch
    // would run a rank that does not speak this controller's records.
    if (!node->engine_json.empty()) {
      std::string stale;
      try {
        stale =
            engine_staleness(*node, EngineSource::beside(sibling_program("flotilla-agent")).hash);
      } catch (const std::exception& e) {
        stale = "node " + name + " runs an engine built there, but " + e.what();
      }
      if (!stale.empty()) problems.push_back("nodes: " + stale);
    }
    // A SLURM login node's own GPUs are not the job's (slurm.gpus_per_node).
    if (config.device != DeviceKind::cuda || node->kind == NodeKind::slurm) continue;
    // dp is one process that drives every GPU of its node; otherwise one GPU a rank.
    const int64_t needed = config.strategy == Strategy::dp ? 1 : config.ranks_per_node;
    const auto probe = parse_probe(node->probe_json);
    if (!probe) continue;  // never probed: nothing known to refuse with
    if (static_cast<int64_t>(probe->gpus.size()) < needed)
      problems.push_back("nodes: node \"" + name + "\" has " + gpu_count(probe->gpus.size()) +
                         ", but device cuda needs " + gpu_count(static_cast<size_t>(needed)) +
                         " there (" +
                         (config.strategy == Strategy::dp
                              ? std::string("dp drives its node's GPUs")
                              : "ranks_per_node " + std::to_string(config.ranks_per_node)) +
                         ")");
  }
  const bool has_local =
      std::find(config.nodes.begin(), config.nodes.end(), "local") != config.nodes.end();
  if (has_local && config.nodes.size() > 1)
    problems.push_back(
        "nodes: \"local\" cannot share a run with other nodes, which could not reach its "
        "rendezvous on 127.0.0.1; add this machine as an SSH node (`flotilla nodes add`) instead");
  if (has_local) {
    // The local node's data can be checked before anything starts; a remote
    // node's agent checks its own before it starts a rank.
    for (auto& problem : data_file_problems(config)) problems.push_back(problem);
  }
  return problems;
}

}  // namespace flotilla::controller
