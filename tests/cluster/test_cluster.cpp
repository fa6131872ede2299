#include "test_cluster.h"

#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace flotilla::testing {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// PATH as root's usually is, so that ip and sshd are found from any shell.
std::string search_path() {
  const char* path = std::getenv("PATH");
  return std::string(path ? path : "/usr/bin:/bin") + ":/usr/sbin:/sbin";
}

// The program `tool` names, searched on search_path(); "" if there is none.
std::string resolve(const std::string& tool) {
  if (tool.find('/') != std::string::npos) return tool;
  std::istringstream dirs(search_path());
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const auto candidate = std::filesystem::path(dir) / tool;
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

}  // namespace

std::filesystem::path cluster_script() {
  return FLOTILLA_CLUSTER_SCRIPT;
}

CommandResult run_command(const std::vector<std::string>& argv) {
  // Output goes to a file rather than a pipe: a daemon the command leaves
  // behind (sshd) must not keep us reading forever.
  std::string out_path = (std::filesystem::temp_directory_path() / "flotilla-cmd-XXXXXX").string();
  const int out = ::mkstemp(out_path.data());
  if (out < 0) throw std::runtime_error(std::string("mkstemp: ") + std::strerror(errno));
  ::close(out);

  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "PATH=", 5) != 0) environment.emplace_back(*e);
  environment.push_back("PATH=" + search_path());
  std::vector<char*> envp, args;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  const std::string program = resolve(argv.at(0));
  pid_t pid = -1;
  const int rc = program.empty() ? ENOENT
                                 : ::posix_spawn(&pid, program.c_str(), &actions, nullptr,
                                                 args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  CommandResult result;
  if (rc != 0) {
    std::filesystem::remove(out_path);
    result.output = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return result;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.output = read_file(out_path);
  std::filesystem::remove(out_path);
  return result;
}

std::pair<int, std::string> shell(const std::string& command) {
  const auto result = run_command({"/bin/sh", "-c", command});
  return {result.status, result.output};
}

bool TestCluster::available(std::string* why, ClusterKind kind) {
  if (::geteuid() != 0) {
    *why =
        "the test cluster needs root (network namespaces, a bridge, sshd); CI runs these as root";
    return false;
  }
  const std::pair<const char*, const char*> tools[] = {
      {"ip", "iproute2"},        {"ssh", "openssh-client"}, {"ssh-keygen", "openssh-client"},
      {"unshare", "util-linux"}, {"flock", "util-linux"},   {"timeout", "coreutils"}};
  for (const auto& [tool, package] : tools) {
    if (resolve(tool).empty()) {
      *why = std::string(tool) + " is missing (" + package + ")";
      return false;
    }
  }
  if (::access("/usr/sbin/sshd", X_OK) != 0) {
    *why = "/usr/sbin/sshd is missing (openssh-server)";
    return false;
  }
  if (kind == ClusterKind::slurm) {
    const std::pair<const char*, const char*> slurm_tools[] = {{"munged", "munge"},
                                                               {"slurmctld", "slurmctld"},
                                                               {"slurmd", "slurmd"},
                                                               {"sinfo", "slurm-client"}};
    for (const auto& [tool, package] : slurm_tools) {
      if (resolve(tool).empty() &&
          ::access((std::string("/usr/sbin/") + tool).c_str(), X_OK) != 0) {
        *why = std::string(tool) + " is missing (" + package + ")";
        return false;
      }
    }
  }
  // Root in a container may still lack CAP_SYS_ADMIN / CAP_NET_ADMIN.
  const auto probe = run_command({"unshare", "--net", "true"});
  if (probe.status != 0) {
    *why = "root, but no network namespace can be made here: " + probe.output;
    return false;
  }
  return true;
}

TestCluster::TestCluster(int hosts, ClusterKind kind)
    : dir_("/tmp/flotilla-cluster-" + std::to_string(::getpid())),
      known_hosts_(dir_ / "known_hosts") {
  std::vector<std::string> args{"up", std::to_string(hosts), "--dir", dir_.string()};
  if (kind == ClusterKind::slurm) args.push_back("--slurm");
  const auto up = script(args);
  if (up.status != 0) {
    // cluster.sh removes a half-made cluster itself; this is for a killed script.
    script({"down", "--dir", dir_.string()});
    throw std::runtime_error("cluster.sh up " + std::to_string(hosts) + " failed (exit " +
                             std::to_string(up.status) + "):\n" + up.output);
  }
  const auto j = nlohmann::json::parse(read_file(dir_ / "cluster.json"));
  key_file_ = j.at("key_file").get<std::string>();
  for (const auto& h : j.at("hosts"))
    hosts_.push_back({h.at("name"), h.at("address"), h.at("user"), h.at("remote_dir"),
                      h.at("netns"), h.at("host_key_pub"), h.at("port")});
  if (j.contains("slurm")) slurm_conf_ = j.at("slurm").at("conf").get<std::string>();
  write_known_hosts();
}

void TestCluster::slurmd(const std::string& host, bool running) const {
  const auto result = script({"slurmd", host, running ? "start" : "stop", "--dir", dir_.string()});
  if (result.status != 0)
    throw std::runtime_error("cluster.sh slurmd " + host + " failed:\n" + result.output);
}

TestCluster::~TestCluster() {
  const auto down = script({"down", "--dir", dir_.string()});
  if (down.status != 0) std::cerr << "cluster.sh down failed:\n" << down.output << std::endl;
}

CommandResult TestCluster::script(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{cluster_script().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  // Every call names this process as the owner: up and down take or keep
  // the cluster for it, and a cluster of another live process is left alone.
  argv.insert(argv.end(), {"--owner", std::to_string(::getpid())});
  return run_command(argv);
}

const ClusterHost& TestCluster::host(const std::string& name) const {
  for (const auto& h : hosts_)
    if (h.name == name) return h;
  throw std::invalid_argument("no host " + name + " in the test cluster");
}

void TestCluster::write_known_hosts() const {
  std::ofstream out(known_hosts_, std::ios::trunc);
  for (const auto& h : hosts_) {
    const std::string pattern =
        h.port == 22 ? h.address : "[" + h.address + "]:" + std::to_string(h.port);
    out << pattern << ' ' << read_file(h.host_key_pub);  // "type key comment\n"
  }
}

std::vector<int> TestCluster::pids_on(const std::string& host) const {
  const auto result = run_command({cluster_script().string(), "pids", this->host(host).netns});
  if (result.status != 0)
    throw std::runtime_error("cluster.sh pids " + host + ": " + result.output);
  std::vector<int> pids;
  std::istringstream words(result.output);
  for (int pid; words >> pid;) pids.push_back(pid);
  return pids;
}

std::vector<std::pair<int, std::string>> TestCluster::processes_on(const std::string& host) const {
  std::vector<std::pair<int, std::string>> found;
  for (int pid : pids_on(host)) {
    auto text = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    if (text.empty()) continue;  // gone since it was listed
    for (auto& c : text)
      if (c == '\0') c = ' ';
    if (text.back() == ' ') text.pop_back();
    found.emplace_back(pid, text);
  }
  return found;
}

void TestCluster::link(const std::string& host, bool up) const {
  const auto result = script({"link", this->host(host).name, up ? "up" : "down"});
  if (result.status != 0)
    throw std::runtime_error("cluster.sh link " + host + ": " + result.output);
}

void TestCluster::drop(const std::string& host, bool on, const std::string& peer) const {
  std::vector<std::string> args{"drop", this->host(host).name, on ? "on" : "off"};
  if (!peer.empty()) args.push_back(peer);
  const auto result = script(args);
  if (result.status != 0)
    throw std::runtime_error("cluster.sh drop " + host + ": " + result.output);
}

void TestCluster::rekey(const std::string& host) const {
  const auto result = script({"rekey", this->host(host).name, "--dir", dir_.string()});
  if (result.status != 0)
    throw std::runtime_error("cluster.sh rekey " + host + ": " + result.output);
  write_known_hosts();
}

CommandResult TestCluster::ssh_result(const std::string& host, const std::string& command,
                                      const std::filesystem::path& known_hosts,
                                      const std::string& user) const {
  const auto& h = this->host(host);
  return run_command(
      {"ssh",
       "-F",
       "/dev/null",
       "-i",
       key_file_.string(),
       "-o",
       "IdentitiesOnly=yes",
       "-o",
       "IdentityAgent=none",
       "-o",
       "UserKnownHostsFile=" + (known_hosts.empty() ? known_hosts_ : known_hosts).string(),
       "-o",
       "GlobalKnownHostsFile=/dev/null",
       "-o",
       "StrictHostKeyChecking=yes",
       "-o",
       "BatchMode=yes",
       "-o",
       "ConnectTimeout=5",
       "-o",
       "LogLevel=ERROR",
       "-p",
       std::to_string(h.port),
       "-l",
       user.empty() ? h.user : user,
       h.address,
       "--",
       command});
}

std::string TestCluster::ssh_as_root(const std::string& host, const std::string& command) const {
  const auto result = ssh_result(host, command, {}, "root");
  if (result.status != 0)
    throw std::runtime_error("ssh root@" + host + " " + command + ": exit " +
                             std::to_string(result.status) + "\n" + result.output);
  return result.output;
}

void TestCluster::give_to_login(const std::filesystem::path& path) const {
  const std::string& user = hosts_.at(0).user;  // every host has the same login
  const passwd* login = ::getpwnam(user.c_str());
  if (!login) throw std::runtime_error("give_to_login: no user " + user + " on this machine");
  const auto give = [&](const std::filesystem::path& p) {
    // lchown: a symlink the test planted is the login's, never what it points to.
    if (::lchown(p.c_str(), login->pw_uid, login->pw_gid) != 0)
      throw std::runtime_error("give_to_login: chown " + p.string() + " to " + user + ": " +
                               std::strerror(errno));
  };
  give(path);
  if (std::filesystem::is_directory(std::filesystem::symlink_status(path)))
    for (const auto& entry : std::filesystem::recursive_directory_iterator(path))
      give(entry.path());
}

std::string TestCluster::ssh(const std::string& host, const std::string& command) const {
  const auto result = ssh_result(host, command);
  if (result.status != 0)
    throw std::runtime_error("ssh " + host + " " + command + ": exit " +
                             std::to_string(result.status) + "\n" + result.output);
  return result.output;
}

}  // namespace flotilla::testing
