#include "cli_nodes.h"

#include <algorithm>
#include <array>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <vector>

#include "exit_status.h"
#include "flotilla/controller/nodes.h"

namespace flotilla::controller {
namespace {

int command_add(Store& store, NodeRow node, bool slurm) {
  if (slurm) node.kind = NodeKind::slurm;
  if (const auto problems = validate_node(node); !problems.empty()) {
    std::cerr << "flotilla: node \"" << node.name << "\" not added:\n";
    for (const auto& p : problems) std::cerr << "  " << p << "\n";
    return kExitBadInput;
  }
  store.add_node(node);
  std::cout << "added " << (slurm ? "SLURM login node " : "node ") << node.name << " ("
            << (node.user.empty() ? "" : node.user + "@") << node.host << ":" << node.port;
  if (!node.slurm_partition.empty()) std::cout << ", partition " << node.slurm_partition;
  if (!node.slurm_account.empty()) std::cout << ", account " << node.slurm_account;
  if (!node.torch_prefix.empty())
    std::cout << ", its engine built against the LibTorch at " << node.torch_prefix
              << " when probed";
  std::cout << ")\n";
  return kExitDone;
}

int command_list(Store& store) {
  struct Line {
    std::string name, kind, address, remote_dir, tags, engine, probe;
  };
  std::vector<Line> lines{{"NAME", "KIND", "ADDRESS", "REMOTE DIR", "TAGS", "ENGINE", "PROBE"}};
  for (const auto& n : store.nodes())
    lines.push_back(
        {n.name, n.is_local() ? "local" : node_kind_name(n.kind),
         n.is_local()
             ? "(this machine)"
             : (n.user.empty() ? "" : n.user + "@") + n.host + ":" + std::to_string(n.port),
         n.remote_dir.empty() ? "~/.flotilla" : n.remote_dir, n.tags.empty() ? "-" : n.tags,
         engine_summary(n), probe_summary(n.probe_json)});
  // Each column as wide as its longest entry and two spaces.
  std::array<size_t, 6> width{};
  for (const auto& l : lines) {
    const std::array<const std::string*, 6> cells{&l.name,       &l.kind, &l.address,
                                                  &l.remote_dir, &l.tags, &l.engine};
    for (size_t i = 0; i < cells.size(); ++i) width[i] = std::max(width[i], cells[i]->size() + 2);
  }
  for (const auto& l : lines)
    std::cout << std::left << std::setw(static_cast<int>(width[0])) << l.name
              << std::setw(static_cast<int>(width[1])) << l.kind
              << std::setw(static_cast<int>(width[2])) << l.address
              << std::setw(static_cast<int>(width[3])) << l.remote_dir
              << std::setw(static_cast<int>(width[4])) << l.tags
              << std::setw(static_cast<int>(width[5])) << l.engine << l.probe << "\n";
  return kExitDone;
}

int command_probe(Store& store, const NodeCommands& c, const ConnectOptions& options) {
  auto names = c.probe_names;
  if (names.empty())
    for (const auto& n : store.nodes()) names.push_back(n.name);
  for (const auto& name : names)
    if (!store.node(name)) {
      std::cerr << "flotilla: no node \"" << name << "\"\n";
      return kExitBadInput;
    }
  int status = kExitDone;
  // A node's engine build, line by line as it comes (from the probing threads).
  std::mutex said;
  const auto progress = [&said](const std::string& node, const std::string& line) {
    std::lock_guard lock(said);
    std::cout << node << ": " << line << std::endl;
  };
  for (const auto& out : probe_nodes(store, names, options, {}, progress)) {
    if (!out.reached) {
      std::cerr << "flotilla: " << out.node << ": " << out.error << "\n";
      status = kExitFailed;
      continue;
    }
    std::cout << out.node << ": " << probe_summary(out.probe_json) << "\n";
    if (!out.deployed.empty()) std::cout << "  " << out.deployed << "\n";
    if (!out.engine_error.empty()) {
      std::cerr << "flotilla: " << out.node << ": its engine was not built: " << out.engine_error
                << "\n";
      status = kExitFailed;
    } else if (const auto node = store.node(out.node); node && out.engine_json) {
      std::cout << "  engine: " << engine_summary(*node) << "\n";
    }
  }
  return status;
}

}  // namespace

void add_node_commands(CLI::App& app, NodeCommands& c) {
  auto* nodes = app.add_subcommand("nodes", "the machines runs can use");
  nodes->require_subcommand(1);
  c.add = nodes->add_subcommand(
      "add", "store a node reached over SSH, or (--slurm) a SLURM cluster's login node");
  c.add->add_option("name", c.new_node.name, "node name")->required();
  c.add->add_option("--host", c.new_node.host, "host name or address")->required();
  c.add->add_option("--port", c.new_node.port, "SSH port")->capture_default_str();
  c.add->add_option("--user", c.new_node.user, "login (default: yours)");
  c.add->add_option("--key", c.new_node.key_file, "private key file (default: ssh-agent)");
  c.add->add_option("--remote-dir", c.new_node.remote_dir,
                    "where bundles and runs live there (default: ~/.flotilla)");
  c.add->add_option("--tags", c.new_node.tags, "comma-separated tags");
  c.add->add_option("--agent-path", c.new_node.agent_path,
                    "use the flotilla-agent installed there instead of deploying the bundle");
  c.add->add_option("--torch", c.new_node.torch_prefix,
                    "the LibTorch on the node to build its own engine against at the probe "
                    "(its prefix, absolute; default: the bundled engine, or python3's torch "
                    "for GPUs the bundled one cannot use)");
  c.add->add_flag("--slurm", c.add_slurm,
                  "the host is a SLURM cluster's login node: runs there are jobs (sbatch)");
  c.add->add_option("--partition", c.new_node.slurm_partition,
                    "SLURM partition for its jobs (default: the cluster's default)");
  c.add->add_option("--account", c.new_node.slurm_account,
                    "SLURM account for its jobs (default: the login's default)");
  c.list = nodes->add_subcommand("list", "list nodes and what their last probe found");
  c.remove = nodes->add_subcommand("remove", "forget a node no live run uses");
  c.remove->add_option("name", c.remove_name, "node name")->required();
  c.probe = nodes->add_subcommand("probe", "connect, deploy if needed, and ask what a node is");
  c.probe->add_option("names", c.probe_names, "nodes (default: all)");
  add_bench_command(*nodes, c.bench);
  add_profile_command(*nodes, c.profile);
}

std::optional<int> run_node_commands(Store& store, const NodeCommands& c,
                                     const ConnectOptions& connect) {
  if (c.add && *c.add) return command_add(store, c.new_node, c.add_slurm);
  if (c.list && *c.list) return command_list(store);
  if (c.remove && *c.remove) {
    store.remove_node(c.remove_name);
    std::cout << "removed node " << c.remove_name << "\n";
    return kExitDone;
  }
  if (c.probe && *c.probe) return command_probe(store, c, connect);
  if (bench_command_given(c.bench)) {
    ControllerOptions options;
    options.connect = connect;
    return run_bench_command(store, c.bench, options);
  }
  if (profile_command_given(c.profile)) {
    ControllerOptions options;
    options.connect = connect;
    return run_profile_command(store, c.profile, options);
  }
  return std::nullopt;
}

}  // namespace flotilla::controller
