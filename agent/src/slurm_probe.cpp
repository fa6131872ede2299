#include "slurm_probe.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

namespace flotilla::agent {
namespace {

struct CommandOutput {
  int status = -1;
  std::string text;  // stdout and stderr together
};

// The shell's status for a command it could not find.
constexpr int kCommandNotFound = 127;

// `command` is one of this file's fixed strings, never user input.
CommandOutput run_fixed(const char* command) {
  CommandOutput out;
  FILE* pipe = ::popen(command, "r");
  if (!pipe) return out;
  std::array<char, 4096> buffer{};
  while (const size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe))
    out.text.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

protocol::SlurmPartitionInfo& partition_named(protocol::SlurmInfo& info, const std::string& name) {
  auto it = std::find_if(info.partitions.begin(), info.partitions.end(),
                         [&](const auto& p) { return p.name == name; });
  if (it != info.partitions.end()) return *it;
  info.partitions.push_back({});
  info.partitions.back().name = name;
  return info.partitions.back();
}

}  // namespace

std::string parse_sinfo_version(const std::string& output) {
  const auto line = trimmed(output.substr(0, output.find('\n')));
  const auto space = line.rfind(' ');
  return space == std::string::npos ? line : line.substr(space + 1);
}

int64_t gpus_in_gres(const std::string& gres) {
  int64_t gpus = 0;
  for (const auto& item : split(gres, ',')) {
    if (item.rfind("gpu", 0) != 0) continue;
    // gpu[:type]:count[(S:sockets)]
    const auto spec = item.substr(0, item.find('('));
    const auto colon = spec.rfind(':');
    if (colon == std::string::npos) continue;
    const auto count = spec.substr(colon + 1);
    if (!count.empty() && std::all_of(count.begin(), count.end(), ::isdigit))
      gpus += std::stoll(count);
  }
  return gpus;
}

void parse_sinfo_nodes(const std::string& output, protocol::SlurmInfo& info) {
  std::stringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const auto fields = split(trimmed(line), '|');
    if (fields.size() != 5 || fields[0].empty()) continue;
    auto partition = fields[1];
    const bool is_default = !partition.empty() && partition.back() == '*';
    if (is_default) partition.pop_back();
    auto& p = partition_named(info, partition);
    p.is_default = p.is_default || is_default;
    if (std::find(p.nodes.begin(), p.nodes.end(), fields[0]) == p.nodes.end())
      p.nodes.push_back(fields[0]);
    // A node in several partitions has a line in each: it is listed once.
    if (std::none_of(info.nodes.begin(), info.nodes.end(),
                     [&](const auto& n) { return n.name == fields[0]; })) {
      protocol::SlurmNodeInfo n;
      n.name = fields[0];
      n.state = fields[2];
      n.cpus = std::all_of(fields[3].begin(), fields[3].end(), ::isdigit) && !fields[3].empty()
                   ? std::stoll(fields[3])
                   : 0;
      n.gres = fields[4] == "(null)" ? "" : fields[4];
      n.gpus = gpus_in_gres(n.gres);
      info.nodes.push_back(n);
    }
  }
}

void parse_sinfo_partitions(const std::string& output, protocol::SlurmInfo& info) {
  std::stringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const auto fields = split(trimmed(line), '|');
    if (fields.size() != 3 || fields[0].empty()) continue;
    auto& p = partition_named(info, fields[0]);
    p.up = fields[1] == "up";
    p.time_limit = fields[2];
  }
}

std::optional<protocol::SlurmInfo> probe_slurm() {
  const auto version = run_fixed("sinfo --version 2>&1");
  if (version.status == kCommandNotFound) return std::nullopt;
  protocol::SlurmInfo info;
  if (version.status == 0) info.version = parse_sinfo_version(version.text);
  const auto nodes = run_fixed("sinfo -h -N -o '%N|%P|%T|%c|%G' 2>&1");
  if (nodes.status != 0) {
    info.error = "sinfo failed: " + trimmed(nodes.text);
    return info;
  }
  parse_sinfo_nodes(nodes.text, info);
  const auto partitions = run_fixed("sinfo -h -o '%R|%a|%l' 2>&1");
  if (partitions.status == 0) parse_sinfo_partitions(partitions.text, info);
  return info;
}

}  // namespace flotilla::agent
