#include "node_access.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <future>
#include <regex>
#include <sstream>

#include "agent_link.h"

namespace flotilla::controller {
namespace {

bool matches(const std::string& text, const char* pattern) {
  return std::regex_match(text, std::regex(pattern));
}

std::string gib(int64_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return out.str();
}

}  // namespace

std::vector<std::string> validate_node(const NodeRow& n) {
  std::vector<std::string> problems;
  auto add = [&](const std::string& field, const std::string& what) {
    problems.push_back(field + ": " + what);
  };
  if (!matches(n.name, "[A-Za-z0-9][A-Za-z0-9._-]{0,62}"))
    add("name",
        "expected 1-63 letters, digits, '.', '_' or '-' (not first), got \"" + n.name + "\"");
  else if (n.name == "local")
    add("name", "\"local\" is this machine's own node and always exists");
  if (!matches(n.host, "[A-Za-z0-9:.\\[\\]%_-]{1,253}") || n.host.front() == '-')
    add("host", "expected a host name or IP address, got \"" + n.host + "\"");
  if (n.port < 1 || n.port > 65535)
    add("port", "must be in 1..65535, got " + std::to_string(n.port));
  if (!n.user.empty() && !matches(n.user, "[A-Za-z_][A-Za-z0-9._-]{0,31}"))
    add("user", "expected a login name, got \"" + n.user + "\"");
  if (!n.key_file.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(n.key_file, ec))
      add("key_file", "no such file: " + n.key_file);
  }
  for (const auto* field : {&n.remote_dir, &n.agent_path, &n.torch_prefix})
    if (field->find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
      add(field == &n.remote_dir   ? "remote_dir"
          : field == &n.agent_path ? "agent_path"
                                   : "torch",
          "must not contain line breaks or NUL");
  if (!n.torch_prefix.empty()) {
    if (n.torch_prefix.front() != '/')
      add("torch",
          "expected the absolute path of a LibTorch on the node, got \"" + n.torch_prefix + "\"");
    if (n.kind == NodeKind::slurm || !n.agent_path.empty())
      add("torch", "only a node that runs the deployed bundle builds its own engine");
  }
  const std::pair<const char*, const std::string*> slurm_fields[] = {
      {"partition", &n.slurm_partition}, {"account", &n.slurm_account}};
  for (const auto& [field, value] : slurm_fields) {
    if (value->empty()) continue;
    if (n.kind != NodeKind::slurm)
      add(field, "only a SLURM node (--slurm) has one, got \"" + *value + "\"");
    else if (!valid_slurm_name(*value))
      add(field, "expected a SLURM " + std::string(field) +
                     " name (letters, digits, '.', '_', '-'), got \"" + *value + "\"");
  }
  if (!n.tags.empty() && !matches(n.tags, "[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*"))
    add("tags", "expected comma-separated words of letters, digits, '.', '_' or '-', got \"" +
                    n.tags + "\"");
  return problems;
}

protocol::ProbeReply probe_agent(const std::string& node, std::unique_ptr<Transport> transport,
                                 std::chrono::milliseconds timeout, bool slurm) {
  auto reply = std::make_shared<std::promise<protocol::ProbeReply>>();
  auto answered = std::make_shared<std::atomic<bool>>(false);
  LinkEvents events;
  events.on_message = [reply, answered](const protocol::Message& message) {
    if (const auto* probe = std::get_if<protocol::ProbeReply>(&message)) {
      if (!answered->exchange(true)) reply->set_value(*probe);
    } else if (const auto* e = std::get_if<protocol::Error>(&message)) {
      if (!answered->exchange(true))
        reply->set_exception(std::make_exception_ptr(std::runtime_error(e->message)));
    }
  };
  AgentLink link(node, std::move(transport), events, timeout);
  auto answer = reply->get_future();
  if (!link.send(protocol::Probe{slurm}))
    throw std::runtime_error("node " + node + ": the agent went away before the probe");
  if (answer.wait_for(timeout) != std::future_status::ready)
    throw std::runtime_error("node " + node + ": no answer to the probe within " +
                             std::to_string(timeout.count() / 1000) + " s");
  return answer.get();
}

void record_known_host(const std::filesystem::path& known_hosts, const std::string& entry) {
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error(known_hosts.string() + ": " + what + ": " + std::strerror(errno));
  };
  const auto folder = known_hosts.parent_path();
  if (!folder.empty() && !std::filesystem::exists(folder)) {
    std::filesystem::create_directories(folder);
    std::filesystem::permissions(folder, std::filesystem::perms::owner_all);
  }
  const int fd = ::open(known_hosts.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot open");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // The umask may have taken bits off 0600, an older file may have had more.
  if (::fchmod(fd, 0600) != 0) fail("cannot make it 0600");
  std::string text = entry;
  if (text.empty() || text.back() != '\n') text += '\n';
  // A file that a person edited may end without a line break.
  struct stat st {};
  char last = '\n';
  if (::fstat(fd, &st) == 0 && st.st_size > 0 && ::pread(fd, &last, 1, st.st_size - 1) == 1 &&
      last != '\n')
    text.insert(text.begin(), '\n');
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write");
    done += static_cast<size_t>(n);
  }
}

std::string probe_to_json(const protocol::ProbeReply& probe) {
  // The agent's own encoding, less the envelope.
  auto j = nlohmann::json::parse(protocol::encode(protocol::Message(probe)));
  j.erase("v");
  j.erase("type");
  return j.dump();
}

std::string probe_summary(const std::string& probe_json) {
  if (probe_json.empty()) return "not probed";
  const auto j = nlohmann::json::parse(probe_json, nullptr, false);
  if (!j.is_object()) return "unreadable probe";
  std::ostringstream out;
  out << j.value("cpus", 0) << " CPUs, " << gib(j.value("memory_bytes", int64_t{0})) << " memory, "
      << gib(j.value("disk_free_bytes", int64_t{0})) << " free";
  const auto gpus = j.value("gpus", nlohmann::json::array());
  if (gpus.empty()) {
    out << ", no GPU";
  } else {
    out << ", " << gpus.size() << " GPU" << (gpus.size() > 1 ? "s" : "") << " ("
        << gpus[0].value("name", std::string("?")) << " "
        << gib(gpus[0].value("memory_bytes", int64_t{0})) << ")";
  }
  out << "; " << j.value("os", std::string("?"));
  // The cluster through the protocol's decoder, which only a SLURM node's probe needs.
  if (j.contains("slurm"))
    if (const auto probe = parse_probe(probe_json); probe && probe->slurm)
      out << "; " << slurm_summary(*probe->slurm);
  return out.str();
}

std::string slurm_summary(const protocol::SlurmInfo& slurm) {
  std::ostringstream out;
  out << "SLURM " << (slurm.version.empty() ? "?" : slurm.version);
  if (!slurm.error.empty()) {
    out << ": " << slurm.error;
    return out.str();
  }
  if (slurm.partitions.empty()) out << ": no partition";
  for (size_t i = 0; i < slurm.partitions.size(); ++i) {
    const auto& p = slurm.partitions[i];
    out << (i == 0 ? ": " : ", ") << p.name << (p.is_default ? "*" : "") << (p.up ? "" : " (down)")
        << " " << p.nodes.size() << " node" << (p.nodes.size() == 1 ? "" : "s");
    // How many of them are idle, and the most GPUs one of them has.
    size_t idle = 0;
    int64_t gpus = 0;
    for (const auto& name : p.nodes)
      for (const auto& n : slurm.nodes)
        if (n.name == name) {
          idle += n.state == "idle" ? 1 : 0;
          gpus = std::max(gpus, n.gpus);
        }
    out << " (" << idle << " idle, "
        << (gpus == 0 ? std::string("no GPU") : std::to_string(gpus) + " GPUs a node") << ")";
  }
  return out.str();
}

}  // namespace flotilla::controller
