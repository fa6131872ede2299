#pragma once
// The rank's compute threads: LibTorch's intra-op pool and the BLAS library's
// own pool (OpenBLAS, BLIS) are two pools that do not know of each other. Left
// alone each sizes itself to every core of the machine, so two ranks on one
// node, or one rank whose BLAS and intra-op workers overlap, run more threads
// than there are cores and spend the difference waiting on each other. Both
// pools get one number, chosen once, before the first tensor operation.

#include <cstdint>
#include <string>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {

// CPUs this process may run on (its affinity mask, which cgroups and taskset
// narrow), at least 1.
int64_t usable_cores();

// The running kernel's boot id: one per machine and boot, the same in every
// container or network namespace of it, so ranks that report the same one
// share the machine's cores. "" where /proc does not say.
std::string machine_boot_id();

// The threads each pool of one rank gets: `threads` when the config gives it;
// otherwise (threads: 0) the node's cores shared among the config's
// ranks_per_node ranks that run there, at least 1 each. A lone rank gets
// every core.
int64_t threads_per_rank(const ExperimentConfig& config, int64_t cores);

// Which BLAS this process calls and what it can set.
struct BlasInfo {
  std::string name;              // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Haswell MAX_THREADS=64"
  bool has_thread_pool = false;  // false: single-threaded (the reference BLAS)
};
// Found at run time (dlsym): the engine links libblas.so.3, whichever
// library Debian's alternatives put behind it.
BlasInfo blas_info();

// Sets LibTorch's intra-op pool and the BLAS pool (where it has one) to `threads`.
void set_compute_threads(int64_t threads);
// The BLAS pool's size as the library reports it (1 without a pool).
int64_t blas_threads();

}  // namespace flotilla
