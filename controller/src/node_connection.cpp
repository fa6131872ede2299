#include "node_connection.h"

#include <QStandardPaths>

#include <cstdlib>
#include <set>

#include "agent_bundle.h"
#include "engine_on_node.h"
#include "flotilla/controller/paths.h"
#include "ssh_session.h"

namespace flotilla::controller {
namespace {

// The libraries a deploy sent beside the programs, as sha256sum lists them.
constexpr const char* kLibraryChecksums = ".libraries.sha256";

// Run by the node's sh in a subshell, with the bundle's folder as $1 and the
// programs' hashes from this controller as $2: every file of the bundle is
// hashed by the node's own sha256sum, the libraries against the list the
// deploy left beside them. Exit 3: no complete bundle there; otherwise
// sha256sum's status, 0 only when every file is there and matches.
constexpr const char* kCheckBundle =
    R"((cd -- "$1" 2>/dev/null && test -e .complete || exit 3
{ printf '%s' "$2"; cat .libraries.sha256 2>/dev/null; } | sha256sum --check --strict --quiet -))";

// What sha256sum said, on one line, for a message.
std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n') c = ';';
  while (!text.empty() && (text.back() == ';' || text.back() == ' ')) text.pop_back();
  return text.size() > 300 ? text.substr(0, 300) + "..." : text;
}

class LocalConnection final : public NodeConnection {
 public:
  LocalConnection(std::filesystem::path agent, int niceness)
      : agent_(std::move(agent)), niceness_(niceness) {}
  DeployReport deploy() override { return {agent_.parent_path().string(), 0, 0, {}}; }
  std::unique_ptr<Transport> start_agent() override { return start_local_agent(agent_, niceness_); }
  std::string address() const override { return "127.0.0.1"; }

 private:
  std::filesystem::path agent_;
  int niceness_ = 0;
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
    if (const auto confirmed = options.confirmed_host_keys.find(node_.name);
        confirmed != options.confirmed_host_keys.end())
      target.confirmed_host_key = confirmed->second;
    target.timeout = options.timeout;
    session_ = SshSession::connect(target);
    // Relative to the login's home directory, for SFTP and commands alike.
    remote_dir_ = node_.remote_dir.empty() ? std::string(".flotilla") : node_.remote_dir;
  }

  DeployReport deploy() override {
    DeployReport report;
    if (!node_.agent_path.empty()) return {node_.agent_path, 0, 0, {}};
    const auto bundle = AgentBundle::beside(agent_binary_);
    bundle_checksums_ = bundle.checksums();
    report.bundle_dir = remote_dir_ + "/bundles/" + bundle.hash();
    const std::string complete = report.bundle_dir + "/.complete";
    // A bundle there is used only when every file still matches its hash;
    // one that does not (a damaged disk, a hand that changed a program) is
    // removed and sent again, never run.
    const auto check =
        session_->run({"sh", "-c", kCheckBundle, "sh", report.bundle_dir, bundle.checksums()},
                      std::chrono::seconds(60));
    if (check.exit_status == 0) return report;
    if (check.exit_status != 3)
      report.replaced = "the agent bundle in " + report.bundle_dir +
                        " did not match its hash (sha256sum: " + one_line(check.out + check.err) +
                        "); it was deployed again";
    // Also what an interrupted deploy left: only files this deploy sends
    // and lists stay beside the programs.
    const auto removed =
        session_->run({"rm", "-rf", "--", report.bundle_dir}, std::chrono::seconds(60));
    if (removed.exit_status != 0)
      throw std::runtime_error("node " + node_.name + ": cannot remove the bundle " +
                               report.bundle_dir + ": " + one_line(removed.err));
    session_->make_directories(report.bundle_dir);
    std::string library_checksums;
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
        library_checksums += file_sha256(*path) + "  " + soname + "\n";
      }
    }
    // From memory: a file of a fixed name in the shared temporary directory
    // was raced by the other nodes' deploys (one removed it as another sent
    // it) and followed whatever symlink another user planted there.
    if (!library_checksums.empty())
      session_->upload_contents(library_checksums, report.bundle_dir + "/" + kLibraryChecksums,
                                0644);
    session_->upload_contents(bundle.hash() + "\n", complete, 0644);
    return report;
  }

  std::unique_ptr<Transport> start_agent() override {
    last_deploy_ = deploy();
    const auto& report = last_deploy_;
    std::vector<std::string> argv;
    if (!node_.agent_path.empty()) {
      argv = {node_.agent_path, "--home", remote_dir_ + "/home"};
    } else {
      // Checked again in the command that starts it: a file changed since
      // the deploy's check stops the start rather than run. Whatever
      // sha256sum says goes to stderr; stdout is the agent's protocol.
      const std::string script =
          std::string(kCheckBundle) +
          " >&2 || { echo \"flotilla: the agent bundle in $1 does not match its hash; "
          "not started\" >&2; exit 126; }\n"
          "bundle=$1 home=$3; shift 3\n"
          "exec env LD_LIBRARY_PATH=\"$bundle\" \"$bundle/flotilla-agent\" --home \"$home\" \"$@\"";
      argv = {
          "sh", "-c", script, "sh", report.bundle_dir, bundle_checksums_, remote_dir_ + "/home"};
    }
    if (!node_.engine_json.empty()) {
      // A stale one (or none to compare with) leaves the bundle's engine:
      // stopping and following runs need none, and placement_problems
      // refuses to start a run on a node whose engine is stale.
      std::optional<std::string> engine;
      try {
        engine = engine_to_run(node_, EngineSource::beside(agent_binary_).hash);
      } catch (const std::exception&) {
      }
      if (engine) {
        argv.push_back("--train-binary");
        argv.push_back(*engine);
      }
    }
    return session_->start(argv);
  }

  std::string build_engine(const std::filesystem::path& source_tarball,
                           const std::string& source_hash, const std::string& torch_prefix,
                           const std::function<void(const std::string&)>& progress) override {
    const std::string dir = remote_dir_ + "/engines/" + source_hash;
    const std::string archive = dir + "/source.tar.gz";
    if (!session_->exists(archive)) {
      session_->make_directories(dir);
      // Under another name until whole: a lost connection leaves no half archive.
      session_->upload(source_tarball, archive + ".part", 0644);
      const auto moved =
          session_->run({"mv", "-f", archive + ".part", archive}, std::chrono::seconds(30));
      if (moved.exit_status != 0)
        throw std::runtime_error("node " + node_.name + ": cannot keep " + archive + ": " +
                                 one_line(moved.err));
    }
    // Unpacked once per source bundle; the script then builds once per LibTorch.
    const std::string script =
        "cd -- \"$1\" || exit 1\n"
        "if [ ! -e src/.complete ]; then rm -rf src && mkdir src && "
        "tar -xzf source.tar.gz -C src && : > src/.complete || "
        "{ echo \"engine build: cannot unpack $1/source.tar.gz\" >&2; exit 1; }; fi\n"
        "exec sh src/scripts/build_engine_on_node.sh \"$2\" .";
    const auto result = session_->run({"sh", "-c", script, "sh", dir, torch_prefix},
                                      std::chrono::minutes(60), [&](const std::string& line) {
                                        if (progress && line.rfind("FLOTILLA_ENGINE ", 0) != 0)
                                          progress(line);
                                      });
    if (result.exit_status != 0) {
      // The script's one line naming what is missing comes last on stderr.
      std::string err = result.err;
      while (!err.empty() && err.back() == '\n') err.pop_back();
      const auto from = err.rfind("engine build: ");
      throw std::runtime_error("node " + node_.name + ": " +
                               (from == std::string::npos
                                    ? "the engine build failed: " + one_line(err)
                                    : err.substr(from)));
    }
    auto engine = engine_from_build_output(result.out);
    engine.source = source_hash;
    engine.torch_prefix = torch_prefix;
    return node_engine_json(engine);
  }

  std::string address() const override { return node_.host; }

 private:
  NodeRow node_;
  std::filesystem::path agent_binary_;
  std::shared_ptr<SshSession> session_;
  std::string remote_dir_;
  std::string bundle_checksums_;  // of the bundle the last deploy checked or sent
};

}  // namespace

std::string NodeConnection::build_engine(const std::filesystem::path&, const std::string&,
                                         const std::string&,
                                         const std::function<void(const std::string&)>&) {
  throw std::runtime_error(
      "this machine runs the engine beside flotilla; it builds none for itself");
}

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
  if (node.is_local())
    return std::make_unique<LocalConnection>(resolved.agent_binary, resolved.local_agent_niceness);
  try {
    return std::make_unique<SshConnection>(node, resolved);
  } catch (const HostKeyError&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error("node " + node.name + ": " + e.what());
  }
}

}  // namespace flotilla::controller
