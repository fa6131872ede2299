#include "runtime/thread_pools.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <fstream>

#include <torch/torch.h>

namespace flotilla {
namespace {

// Looked up among the libraries already loaded (libblas.so.3 comes with
// LibTorch); nullptr where the BLAS behind it lacks the function.
template <typename Function>
Function* loaded_function(const char* name) {
  return reinterpret_cast<Function*>(::dlsym(RTLD_DEFAULT, name));
}

}  // namespace

int64_t usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::string machine_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

int64_t threads_per_rank(const ExperimentConfig& config, int64_t cores) {
  if (config.threads > 0) return config.threads;
  return std::max<int64_t>(1, cores / std::max<int64_t>(1, config.ranks_per_node));
}

BlasInfo blas_info() {
  if (auto* config = loaded_function<char*()>("openblas_get_config")) {
    // "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Haswell MAX_THREADS=64" (it names itself).
    std::string name = config();
    if (name.rfind("OpenBLAS", 0) != 0) name = "OpenBLAS " + name;
    return {name, true};
  }
  if (auto* version = loaded_function<const char*()>("bli_info_get_version_str"))
    return {std::string("BLIS ") + version(), true};
  if (loaded_function<void(int)>("mkl_set_num_threads"))
    return {"Intel MKL", true};  // LibTorch's own intra-op setting covers it
  return {"reference BLAS (single-threaded)", false};
}

void set_compute_threads(int64_t threads) {
  const int n = static_cast<int>(std::max<int64_t>(1, threads));
  torch::set_num_threads(n);
  if (auto* openblas = loaded_function<void(int)>("openblas_set_num_threads")) openblas(n);
  if (auto* blis = loaded_function<void(int64_t)>("bli_thread_set_num_threads")) blis(n);
}

int64_t blas_threads() {
  if (auto* openblas = loaded_function<int()>("openblas_get_num_threads")) return openblas();
  if (auto* blis = loaded_function<int64_t()>("bli_thread_get_num_threads")) return blis();
  return 1;
}

}  // namespace flotilla
