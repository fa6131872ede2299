#pragma once
// Reaching a node's agent: the local node through a pipe, every other node
// over SSH, with the agent bundle deployed first unless the node has
// binaries installed (agent_path).

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "flotilla/controller/connect_options.h"
#include "flotilla/controller/store.h"
#include "transport.h"

namespace flotilla::controller {

// What a deploy did, for `nodes probe`, tests and the benchmark.
struct DeployReport {
  std::string bundle_dir;  // on the node
  int64_t files_uploaded = 0;
  int64_t bytes_uploaded = 0;
  // Why the copy that was there was replaced (a file that does not match its
  // hash, what sha256sum said); empty when it matched or none was there.
  std::string replaced;
};

class NodeConnection {
 public:
  // Connects (SSH for any node but `local`); throws std::runtime_error naming
  // the node, or HostKeyError for a host key that is unknown or has changed.
  static std::unique_ptr<NodeConnection> open(const NodeRow& node, const ConnectOptions& options);
  // Whether the node's SSH port accepts a TCP connection within
  // kPortCheckTimeout (always, for `local`): a closed link to a node that
  // answers lost its agent; one to a node that does not lost the path.
  static bool answers(const NodeRow& node);
  virtual ~NodeConnection() = default;

  // Makes sure the node has this controller's agent bundle; uploads only
  // what is not there under the bundle's content hash.
  virtual DeployReport deploy() = 0;
  // Deploys if needed and starts the agent; the connection lives as long as
  // the returned transport does.
  virtual std::unique_ptr<Transport> start_agent() = 0;
  // What the last deploy (start_agent's included) did.
  const DeployReport& last_deploy() const { return last_deploy_; }
  // Sends the engine source bundle unless the node has it, and builds the
  // node's engine against its LibTorch (`torch_prefix`, or python3's when
  // empty), or finds it built before. Each line of the build's output goes
  // to `progress` as it comes. Returns what was built, as NodeRow::engine_json
  // keeps it (engine_on_node.h); throws std::runtime_error with what the
  // build said is missing.
  virtual std::string build_engine(const std::filesystem::path& source_tarball,
                                   const std::string& source_hash, const std::string& torch_prefix,
                                   const std::function<void(const std::string&)>& progress);
  // The address the node's peers use to reach it (a rendezvous host).
  virtual std::string address() const = 0;

 protected:
  DeployReport last_deploy_;
};

}  // namespace flotilla::controller
