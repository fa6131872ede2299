#include "node_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "slurm_probe.h"
#include "system_metrics.h"

namespace flotilla::agent {
namespace {

std::string os_name() {
  std::ifstream in("/etc/os-release");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("PRETTY_NAME=", 0) != 0) continue;
    std::string value = line.substr(12);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    return value;
  }
  return "unknown";
}

}  // namespace

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof address;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

protocol::ProbeReply probe_node(const std::filesystem::path& home, bool slurm) {
  protocol::ProbeReply reply;
  reply.os = os_name();
  utsname names{};
  if (::uname(&names) == 0) {
    reply.kernel = std::string(names.sysname) + " " + names.release;
    reply.hostname = names.nodename;
  }
  reply.cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  reply.memory_bytes = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) *
                       static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
  // The home may not exist yet on a fresh node: its nearest existing parent tells.
  auto where = home;
  while (!where.empty() && !std::filesystem::exists(where) && where != where.parent_path())
    where = where.parent_path();
  struct statvfs disk {};
  if (::statvfs(where.empty() ? "/" : where.c_str(), &disk) == 0)
    reply.disk_free_bytes =
        static_cast<int64_t>(disk.f_bavail) * static_cast<int64_t>(disk.f_frsize);
  reply.free_port = free_tcp_port();
  if (auto nvml = Nvml::load())
    for (const auto& gpu : nvml->sample())
      reply.gpus.push_back({gpu.index, gpu.name, static_cast<int64_t>(gpu.mem_total)});
  if (slurm) reply.slurm = probe_slurm();
  return reply;
}

}  // namespace flotilla::agent
