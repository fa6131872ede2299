#include "cli_nodes.h"

#include <iomanip>
#include <iostream>

#include "exit_status.h"
#include "flotilla/controller/nodes.h"

namespace flotilla::controller {
namespace {

int command_add(Store& store, const NodeRow& node) {
  if (const auto problems = validate_node(node); !problems.empty()) {
    std::cerr << "flotilla: node \"" << node.name << "\" not added:\n";
    for (const auto& p : problems) std::cerr << "  " << p << "\n";
    return kExitBadInput;
  }
  store.add_node(node);
  std::cout << "added node " << node.name << " (" << (node.user.empty() ? "" : node.user + "@")
            << node.host << ":" << node.port << ")\n";
  return kExitDone;
}

int command_list(Store& store) {
  std::cout << std::left << std::setw(14) << "NAME" << std::setw(26) << "ADDRESS" << std::setw(22)
            << "REMOTE DIR" << std::setw(14) << "TAGS"
            << "PROBE\n";
  for (const auto& n : store.nodes()) {
    const std::string address =
        n.is_local() ? "(this machine)"
                     : (n.user.empty() ? "" : n.user + "@") + n.host + ":" + std::to_string(n.port);
    std::cout << std::left << std::setw(14) << n.name << std::setw(26) << address << std::setw(22)
              << (n.remote_dir.empty() ? "~/.flotilla" : n.remote_dir) << std::setw(14)
              << (n.tags.empty() ? "-" : n.tags) << probe_summary(n.probe_json) << "\n";
  }
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
  for (const auto& out : probe_nodes(store, names, options)) {
    if (!out.reached) {
      std::cerr << "flotilla: " << out.node << ": " << out.error << "\n";
      status = kExitFailed;
      continue;
    }
    std::cout << out.node << ": " << probe_summary(out.probe_json) << "\n";
    if (!out.deployed.empty()) std::cout << "  " << out.deployed << "\n";
  }
  return status;
}

}  // namespace

void add_node_commands(CLI::App& app, NodeCommands& c) {
  auto* nodes = app.add_subcommand("nodes", "the machines runs can use");
  nodes->require_subcommand(1);
  c.add = nodes->add_subcommand("add", "store a node reached over SSH");
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
  c.list = nodes->add_subcommand("list", "list nodes and what their last probe found");
  c.remove = nodes->add_subcommand("remove", "forget a node no live run uses");
  c.remove->add_option("name", c.remove_name, "node name")->required();
  c.probe = nodes->add_subcommand("probe", "connect, deploy if needed, and ask what a node is");
  c.probe->add_option("names", c.probe_names, "nodes (default: all)");
  add_bench_command(*nodes, c.bench);
}

std::optional<int> run_node_commands(Store& store, const NodeCommands& c,
                                     const ConnectOptions& connect) {
  if (c.add && *c.add) return command_add(store, c.new_node);
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
  return std::nullopt;
}

}  // namespace flotilla::controller
