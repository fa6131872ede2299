#include "node_connection.h"

#include <QStandardPaths>

#include <cstdlib>
#include <set>

#include "agent_bundle.h"
#include "flotilla/controller/paths.h"
#include "ssh_session.h"

namespace flotilla::controller {
namespace {

class LocalConnection final : public NodeConnection {
 public:
  explicit LocalConnection(std::filesystem::path agent) : agent_(std::move(agent)) {}
  DeployReport deploy() override { return {agent_.parent_path().string(), 0, 0}; }
  std::unique_ptr<Transport> start_agent() override { return start_local_agent(agent_); }
  std::string address() const override { return "127.0.0.1"; }

 private:
  std::filesystem::path agent_;
};

class SshConnection final : public NodeConnection {
 public:
  SshConnection(NodeRow node, const ConnectOptions& options)
      : node_(std::move(node)), agent_binary_(options.agent_binary) {
    SshTarget target;
    target.host = node_.host;
    target.port = node_.port;
    target.user = node_.user;
    if (target.user.empty())
      if (const char* user = std::getenv("USER")) target.user = user;
    if (target.user.empty()) target.user = "root";
    target.key_file = node_.key_file;
    target.known_hosts = options.known_hosts.empty() ? default_known_hosts() : options.known_hosts;
    target.trust_new_host_key = options.trust_new_host_key;
    target.timeout = options.timeout;
    session_ = SshSession::connect(target);
    // Relative to the login's home directory, for SFTP and commands alike.
    remote_dir_ = node_.remote_dir.empty() ? std::string(".flotilla") : node_.remote_dir;
  }

  DeployReport deploy() override {
    DeployReport report;
    if (!node_.agent_path.empty()) return {node_.agent_path, 0, 0};
    const auto bundle = AgentBundle::beside(agent_binary_);
    report.bundle_dir = remote_dir_ + "/bundles/" + bundle.hash();
    const std::string complete = report.bundle_dir + "/.complete";
    if (session_->exists(complete)) return report;
    session_->make_directories(report.bundle_dir);
    auto send = [&](const std::filesystem::path& local, const std::string& name, int mode) {
      session_->upload(local, report.bundle_dir + "/" + name, mode);
      ++report.files_uploaded;
      report.bytes_uploaded += static_cast<int64_t>(std::filesystem::file_size(local));
    };
    for (const auto& program : bundle.programs()) send(program.path, program.name, 0755);
    // Libraries the node cannot resolve go beside the programs (their RUNPATH
    // is $ORIGIN); what those need in turn shows in the next listing.
    // One `ldd` lists every program: each remote command pays for the
    // login shell and its rc files, which can take seconds on a real node.
    std::vector<std::string> ldd{"env", "LD_LIBRARY_PATH=" + report.bundle_dir, "ldd"};
    for (const auto& program : bundle.programs())
      ldd.push_back(report.bundle_dir + "/" + program.name);
    for (int round = 0; round < 8; ++round) {
      std::set<std::string> missing;
      for (auto& soname : missing_libraries(session_->run(ldd, std::chrono::seconds(30)).out))
        missing.insert(soname);
      if (missing.empty()) break;
      for (const auto& soname : missing) {
        const auto path = bundle.library(soname);
        if (!path)
          throw std::runtime_error("node " + node_.name + " lacks " + soname +
                                   ", and this machine has no copy of it to send");
        send(*path, soname, 0644);
      }
    }
    // From memory: a file of a fixed name in the shared temporary directory
    // was raced by the other nodes' deploys (one removed it as another sent
    // it) and followed whatever symlink another user planted there.
    session_->upload_contents(bundle.hash() + "\n", complete, 0644);
    return report;
  }

  std::unique_ptr<Transport> start_agent() override {
    const auto report = deploy();
    std::vector<std::string> argv;
    if (!node_.agent_path.empty()) {
      argv = {node_.agent_path, "--home", remote_dir_ + "/home"};
    } else {
      argv = {"env", "LD_LIBRARY_PATH=" + report.bundle_dir, report.bundle_dir + "/flotilla-agent",
              "--home", remote_dir_ + "/home"};
    }
    return session_->start(argv);
  }

  std::string address() const override { return node_.host; }

 private:
  NodeRow node_;
  std::filesystem::path agent_binary_;
  std::shared_ptr<SshSession> session_;
  std::string remote_dir_;
};

}  // namespace

std::filesystem::path default_known_hosts() {
  return std::filesystem::path(
             QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation).toStdString()) /
         "flotilla" / "known_hosts";
}

bool NodeConnection::answers(const NodeRow& node) {
  return node.is_local() ||
         tcp_port_answers(node.host, node.port, std::chrono::milliseconds(kPortCheckTimeout));
}

std::unique_ptr<NodeConnection> NodeConnection::open(const NodeRow& node,
                                                     const ConnectOptions& options) {
  ConnectOptions resolved = options;
  if (resolved.agent_binary.empty()) resolved.agent_binary = sibling_program("flotilla-agent");
  if (node.is_local()) return std::make_unique<LocalConnection>(resolved.agent_binary);
  try {
    return std::make_unique<SshConnection>(node, resolved);
  } catch (const HostKeyError&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error("node " + node.name + ": " + e.what());
  }
}

}  // namespace flotilla::controller
