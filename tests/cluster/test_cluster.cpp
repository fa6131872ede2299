#include "test_cluster.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace flotilla::testing {
namespace {
const std::string kScript = FLOTILLA_CLUSTER_SCRIPT;
}

std::pair<int, std::string> shell(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

bool TestCluster::available(std::string* why) {
  if (::geteuid() != 0) {
    *why = "the test cluster needs root (network namespaces, sshd); CI runs these as root";
    return false;
  }
  for (const char* tool : {"sshd", "ssh-keygen", "ip"}) {
    if (shell(std::string("PATH=$PATH:/usr/sbin:/sbin command -v ") + tool).first != 0) {
      *why = std::string(tool) + " is missing (openssh-server, openssh-client, iproute2)";
      return false;
    }
  }
  return true;
}

TestCluster::TestCluster(int hosts) : dir_("/tmp/flotilla-cluster-" + std::to_string(::getpid())) {
  const auto [status, output] =
      shell("'" + kScript + "' up " + std::to_string(hosts) + " '" + dir_.string() + "'");
  if (status != 0) {
    shell("'" + kScript + "' down '" + dir_.string() + "'");
    throw std::runtime_error("cluster.sh up failed:\n" + output);
  }
  std::ifstream in(dir_ / "cluster.json");
  const auto j = nlohmann::json::parse(in);
  key_file_ = j.at("key_file").get<std::string>();
  for (const auto& h : j.at("hosts"))
    hosts_.push_back({h.at("name"), h.at("address"), h.at("user"), h.at("remote_dir"),
                      h.at("netns"), h.at("host_key_pub"), h.at("port")});
}

TestCluster::~TestCluster() {
  shell("'" + kScript + "' down '" + dir_.string() + "'");
}

std::vector<std::pair<int, std::string>> TestCluster::processes_on(const std::string& host) const {
  std::vector<std::pair<int, std::string>> found;
  std::istringstream pids(shell("ip netns pids " + host).second);
  for (int pid; pids >> pid;) {
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
    std::string text((std::istreambuf_iterator<char>(cmdline)), {});
    for (auto& c : text)
      if (c == '\0') c = ' ';
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    // Zombies hold nothing; this container's init does not reap them.
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') continue;
    found.emplace_back(pid, text);
  }
  return found;
}

void TestCluster::link(const std::string& host, bool up) const {
  shell("'" + kScript + "' link " + host + (up ? " up" : " down"));
}

void TestCluster::rekey(const std::string& host) const {
  const auto [status, output] =
      shell("'" + kScript + "' rekey " + host + " '" + dir_.string() + "'");
  if (status != 0) throw std::runtime_error("rekey failed: " + output);
}

}  // namespace flotilla::testing
