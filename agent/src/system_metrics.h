#pragma once
// The node's side of the metrics, sampled by the agent as the seeds sampled
// them by hand with vnstat and nvidia-smi: bytes on each network interface
// (/proc/net/dev), CPU use (/proc/stat), each rank's RSS, and GPUs through
// NVML, loaded at run time where a driver is installed.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flotilla::agent {

struct GpuSample {
  int index = 0;
  std::string name;
  double util_percent = 0;
  uint64_t mem_used = 0, mem_total = 0;
};

class Nvml {
 public:
  // Empty where libnvidia-ml is absent: GPU fields are then left out.
  static std::unique_ptr<Nvml> load();
  ~Nvml();
  std::vector<GpuSample> sample();

 private:
  void* library_ = nullptr;
  struct Api;
  std::unique_ptr<Api> api_;
};

class SystemSampler {
 public:
  SystemSampler();
  ~SystemSampler();
  // One "system" record (JSON object text) for the ranks' processes, taken
  // at `time` (seconds since the Unix epoch on this node's clock).
  std::string sample(const std::map<int64_t, pid_t>& rank_pids, double time);

 private:
  uint64_t last_busy_ = 0, last_total_ = 0;
  std::unique_ptr<Nvml> nvml_;
};

}  // namespace flotilla::agent
