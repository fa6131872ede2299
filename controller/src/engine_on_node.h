#pragma once
// A node's own engine: when the bundled flotilla-train cannot use what a node
// has (its GPUs need a CUDA LibTorch, or the person named a LibTorch with
// `nodes add --torch`), the probe sends the engine source bundle and the node
// builds flotilla-train against its LibTorch (scripts/build_engine_on_node.sh),
// once per source bundle and LibTorch. Runs then start its agent with that
// engine (--train-binary).

#include <filesystem>
#include <optional>
#include <string>

#include "flotilla/controller/store.h"
#include "flotilla/protocol/messages.h"

namespace flotilla::controller {

// The engine source bundle beside this controller's programs
// (../share/flotilla/engine-source.tar.gz from the agent's folder).
struct EngineSource {
  std::filesystem::path tarball;
  std::string hash;  // hex SHA-256 of the archive, 16 digits
  // Throws std::runtime_error naming the file when it is not there.
  static EngineSource beside(const std::filesystem::path& agent_binary);
};

// What a node built, as NodeRow::engine_json keeps it.
struct NodeEngine {
  std::string path;           // flotilla-train on the node
  std::string source;         // EngineSource::hash it was built from
  std::string torch_prefix;   // the node's --torch when it was built ("" : python3's)
  std::string torch_version;  // e.g. "2.5.1"
  std::string torch_dir;      // the TorchConfig.cmake folder it was built against
  bool cuda = false;
};
std::optional<NodeEngine> parse_node_engine(const std::string& engine_json);
std::string node_engine_json(const NodeEngine& engine);
// The script's last line "FLOTILLA_ENGINE {json}", read; throws
// std::runtime_error when the output has none.
NodeEngine engine_from_build_output(const std::string& output);

// Why `node` needs its own engine, in words; empty when the bundle's serves
// (no --torch, and no GPU or a bundled engine that has CUDA). A node with an
// installed agent (agent_path) or a SLURM login node never builds one.
std::string own_engine_reason(const NodeRow& node, const protocol::ProbeReply& probe,
                              bool bundle_has_cuda);

// Why the engine built on `node` must not run: built from other sources than
// `source_hash` or against another LibTorch than the node's --torch now, in
// words naming `flotilla nodes probe NODE`; empty when it may (or there is none).
std::string engine_staleness(const NodeRow& node, const std::string& source_hash);
// The engine runs on `node` start with: its built one when it is not stale;
// nothing for the bundle's (placement_problems refuses a run on a stale one,
// and stopping or following a run needs no engine).
std::optional<std::string> engine_to_run(const NodeRow& node, const std::string& source_hash);

}  // namespace flotilla::controller
