#include "engine_on_node.h"

#include <nlohmann/json.hpp>

#include <map>
#include <mutex>
#include <stdexcept>

#include "agent_bundle.h"
#include "flotilla/controller/nodes.h"

namespace flotilla::controller {

EngineSource EngineSource::beside(const std::filesystem::path& agent_binary) {
  EngineSource source;
  source.tarball =
      agent_binary.parent_path().parent_path() / "share" / "flotilla" / "engine-source.tar.gz";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source.tarball, ec))
    throw std::runtime_error("the engine source bundle " + source.tarball.string() +
                             " is not there (the build makes it: target flotilla-engine-source)");
  // Asked at every agent start and every placement check of a node with its
  // own engine: the archive is hashed again only when it changed.
  static std::mutex mutex;
  static std::map<std::filesystem::path, std::pair<std::filesystem::file_time_type, std::string>>
      hashes;
  const auto changed = std::filesystem::last_write_time(source.tarball, ec);
  std::lock_guard lock(mutex);
  auto& [seen, hash] = hashes[source.tarball];
  if (ec || hash.empty() || seen != changed) {
    hash = file_sha256(source.tarball).substr(0, 16);
    seen = changed;
  }
  source.hash = hash;
  return source;
}

std::optional<NodeEngine> parse_node_engine(const std::string& engine_json) {
  if (engine_json.empty()) return std::nullopt;
  const auto j = nlohmann::json::parse(engine_json, nullptr, false);
  if (!j.is_object() || !j.contains("path") || !j["path"].is_string()) return std::nullopt;
  NodeEngine e;
  e.path = j["path"].get<std::string>();
  e.source = j.value("source", std::string());
  e.torch_prefix = j.value("torch_prefix", std::string());
  e.torch_version = j.value("torch_version", std::string());
  e.torch_dir = j.value("torch_dir", std::string());
  e.cuda = j.value("cuda", false);
  return e;
}

std::string node_engine_json(const NodeEngine& e) {
  return nlohmann::json{{"path", e.path},
                        {"source", e.source},
                        {"torch_prefix", e.torch_prefix},
                        {"torch_version", e.torch_version},
                        {"torch_dir", e.torch_dir},
                        {"cuda", e.cuda}}
      .dump();
}

NodeEngine engine_from_build_output(const std::string& output) {
  const std::string marker = "FLOTILLA_ENGINE ";
  const auto at = output.rfind(marker);
  if (at == std::string::npos)
    throw std::runtime_error("the engine build said nothing of what it built");
  const auto end = output.find('\n', at);
  const auto text = output.substr(
      at + marker.size(), end == std::string::npos ? std::string::npos : end - at - marker.size());
  const auto engine = parse_node_engine(text);
  if (!engine) throw std::runtime_error("the engine build's answer is unreadable: " + text);
  return *engine;
}

std::string own_engine_reason(const NodeRow& node, const protocol::ProbeReply& probe,
                              bool bundle_has_cuda) {
  if (node.is_local() || node.kind == NodeKind::slurm || !node.agent_path.empty()) return {};
  if (!node.torch_prefix.empty()) return "the node names its LibTorch (" + node.torch_prefix + ")";
  if (!probe.gpus.empty() && !bundle_has_cuda)
    return "its " + std::to_string(probe.gpus.size()) + " GPU" +
           (probe.gpus.size() == 1 ? "" : "s") +
           " need a CUDA engine and the bundled one is built for the CPU";
  return {};
}

std::string engine_staleness(const NodeRow& node, const std::string& source_hash) {
  const auto engine = parse_node_engine(node.engine_json);
  if (!engine) return {};
  std::string why;
  if (engine->source != source_hash)
    why = "from another Flotilla's sources";
  else if (engine->torch_prefix != node.torch_prefix)
    why = "against another LibTorch (" +
          (engine->torch_prefix.empty() ? std::string("python3's") : engine->torch_prefix) + ")";
  else
    return {};
  return "node " + node.name + ": its engine was built " + why + "; `flotilla nodes probe " +
         node.name + "` builds it again";
}

std::optional<std::string> engine_to_run(const NodeRow& node, const std::string& source_hash) {
  const auto engine = parse_node_engine(node.engine_json);
  if (!engine || !engine_staleness(node, source_hash).empty()) return std::nullopt;
  return engine->path;
}

std::string engine_summary(const NodeRow& node) {
  if (node.is_local()) return "beside flotilla";
  if (!node.agent_path.empty()) return "installed with " + node.agent_path;
  const auto engine = parse_node_engine(node.engine_json);
  if (!engine) return node.torch_prefix.empty() ? "bundled" : "bundled (not built yet)";
  return "built against LibTorch " + engine->torch_version + (engine->cuda ? " (CUDA)" : " (CPU)") +
         " at " +
         (engine->torch_prefix.empty() ? "python3's torch (" + engine->torch_dir + ")"
                                       : engine->torch_prefix);
}

}  // namespace flotilla::controller
