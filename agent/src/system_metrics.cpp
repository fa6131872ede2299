#include "system_metrics.h"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flotilla/protocol/nic_counters.h"

namespace flotilla::agent {

namespace {

void read_cpu(uint64_t& busy, uint64_t& total) {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  busy = user + nice + system + irq + softirq + steal;
  total = busy + idle + iowait;
}

int64_t rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

}  // namespace

// The few NVML entry points used, declared as the driver's header does.
struct Nvml::Api {
  using Device = void*;
  struct Utilization {
    unsigned gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  int (*init)();
  int (*shutdown)();
  int (*count)(unsigned*);
  int (*handle)(unsigned, Device*);
  int (*utilization)(Device, Utilization*);
  int (*memory)(Device, Memory*);
  int (*name)(Device, char*, unsigned);
};

std::unique_ptr<Nvml> Nvml::load() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  auto nvml = std::unique_ptr<Nvml>(new Nvml);
  nvml->library_ = lib;
  nvml->api_ = std::make_unique<Api>();
  auto& a = *nvml->api_;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name));
  };
  sym(a.init, "nvmlInit_v2");
  sym(a.shutdown, "nvmlShutdown");
  sym(a.count, "nvmlDeviceGetCount_v2");
  sym(a.handle, "nvmlDeviceGetHandleByIndex_v2");
  sym(a.utilization, "nvmlDeviceGetUtilizationRates");
  sym(a.memory, "nvmlDeviceGetMemoryInfo");
  sym(a.name, "nvmlDeviceGetName");
  if (!a.init || !a.count || !a.handle || !a.utilization || !a.memory || !a.name || a.init() != 0)
    return nullptr;
  return nvml;
}

Nvml::~Nvml() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (library_) dlclose(library_);
}

std::vector<GpuSample> Nvml::sample() {
  std::vector<GpuSample> out;
  unsigned count = 0;
  if (api_->count(&count) != 0) return out;
  for (unsigned i = 0; i < count; ++i) {
    Api::Device device = nullptr;
    if (api_->handle(i, &device) != 0) continue;
    GpuSample s;
    s.index = static_cast<int>(i);
    char name[96] = {};
    if (api_->name(device, name, sizeof name) == 0) s.name = name;
    Api::Utilization u{};
    if (api_->utilization(device, &u) == 0) s.util_percent = u.gpu;
    Api::Memory m{};
    if (api_->memory(device, &m) == 0) {
      s.mem_used = m.used;
      s.mem_total = m.total;
    }
    out.push_back(s);
  }
  return out;
}

SystemSampler::SystemSampler() : nvml_(Nvml::load()) {
  read_cpu(last_busy_, last_total_);
}
SystemSampler::~SystemSampler() = default;

std::string SystemSampler::sample(const std::map<int64_t, pid_t>& rank_pids, double time) {
  nlohmann::json record{{"type", "system"}, {"time", time}};
  const auto interfaces = protocol::read_nic_bytes();
  nlohmann::json nics = nlohmann::json::object();
  for (const auto& [name, bytes] : interfaces) nics[name] = {{"rx", bytes.rx}, {"tx", bytes.tx}};
  const auto external = protocol::external_nic_bytes(interfaces);
  record["nic_rx"] = external.rx;  // all interfaces but loopback, cumulative, as vnstat counts
  record["nic_tx"] = external.tx;
  record["nics"] = nics;
  uint64_t busy = 0, total = 0;
  read_cpu(busy, total);
  record["cpu_util"] =
      total > last_total_ ? double(busy - last_busy_) / double(total - last_total_) : 0.0;
  last_busy_ = busy;
  last_total_ = total;
  nlohmann::json rss = nlohmann::json::object();
  for (const auto& [rank, pid] : rank_pids) rss[std::to_string(rank)] = rss_bytes(pid);
  record["rank_rss"] = rss;
  if (nvml_) {
    auto gpus = nlohmann::json::array();
    for (const auto& g : nvml_->sample())
      gpus.push_back({{"index", g.index},
                      {"name", g.name},
                      {"util", g.util_percent / 100.0},
                      {"mem_used", g.mem_used},
                      {"mem_total", g.mem_total}});
    record["gpus"] = gpus;
  }
  return record.dump();
}

}  // namespace flotilla::agent
