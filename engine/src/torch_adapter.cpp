#include "torch_adapter.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>

#include <torch/library.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/communicator.h"
#include "flotilla/engine/training.h"
#include "metrics/phase_timer.h"

#ifdef FLOTILLA_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#endif

namespace flotilla {

std::string engine_program() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : path.string();
}

std::string torch_version() {
  return TORCH_VERSION;
}

bool cuda_compiled() {
#ifdef FLOTILLA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_usable() {
  return cuda_compiled() && torch::cuda::is_available();
}

int64_t visible_cuda_devices() {
  return cuda_usable() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
}

namespace {
MemoryStats process_memory() {
  MemoryStats stats;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    long size = 0, resident = 0;
    if (std::fscanf(f, "%ld %ld", &size, &resident) == 2)
      stats.allocated = stats.reserved = resident * sysconf(_SC_PAGESIZE);
    std::fclose(f);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  // ru_maxrss is sampled by the kernel's own accounting and can trail statm.
  stats.peak = std::max<int64_t>(static_cast<int64_t>(usage.ru_maxrss) * 1024, stats.allocated);
  return stats;
}
}  // namespace

MemoryStats memory_stats(bool cuda, int device_index) {
#ifdef FLOTILLA_WITH_CUDA
  if (cuda) {
    // The caching allocator makes its per-device tables when the process first
    // touches CUDA; before that getDeviceStats throws "Invalid device argument"
    // (seen on the H100 when statistics were read before any allocation). An
    // empty tensor on the device initialises CUDA through the same path every
    // LibTorch version's factories take, without allocating anything.
    static std::once_flag cuda_initialised;
    std::call_once(cuda_initialised, [device_index] {
      (void)at::empty({0}, at::TensorOptions().device(
                               at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index))));
    });
    // Index 0 is StatType::AGGREGATE in every version; the enum's namespace moved.
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_index);
    return {stats.allocated_bytes[0].current, stats.reserved_bytes[0].current,
            stats.allocated_bytes[0].peak};
  }
#else
  (void)cuda;
  (void)device_index;
#endif
  return process_memory();
}

void reset_cuda_peak_memory(int device_index) {
#ifdef FLOTILLA_WITH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_index);
#else
  (void)device_index;
#endif
}

void limit_cuda_memory(int device_index, int64_t bytes) {
#ifdef FLOTILLA_WITH_CUDA
  if (bytes <= 0) return;
  size_t free = 0, total = 0;
  const auto previous = c10::cuda::current_device();
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
  const cudaError_t status = cudaMemGetInfo(&free, &total);
  c10::cuda::set_device(previous);
  if (status != cudaSuccess || total == 0)
    throw std::runtime_error("limits.memory_mb: cannot read the memory of GPU " +
                             std::to_string(device_index) + ": " + cudaGetErrorString(status));
  const double fraction = std::min(1.0, static_cast<double>(bytes) / static_cast<double>(total));
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device_index);
#else
  (void)device_index;
  (void)bytes;
#endif
}

#ifdef FLOTILLA_WITH_CUDA
namespace {
class CudaEventTimer final : public PhaseTimer {
 public:
  void begin_step() override {
    std::swap(current_, previous_step_);
    current_.marks.clear();
    current_.used = 0;
    record(Phase::count);
  }
  void end_phase(Phase phase) override { record(phase); }
  void end_step() override {
    record(Phase::count);
    has_previous_ = has_last_;
    has_last_ = true;
  }
  std::optional<PhaseTimes> take_previous() override {
    if (!has_previous_) return std::nullopt;
    has_previous_ = false;
    return times(previous_step_);
  }
  std::optional<PhaseTimes> take_last() override {
    has_previous_ = false;
    if (!has_last_) return std::nullopt;
    has_last_ = false;
    return times(current_);
  }

 private:
  struct Step {
    std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events;
    std::vector<Phase> marks;  // marks[i]: the phase that events[i] ends (count: step bounds)
    size_t used = 0;
  };
  void record(Phase phase) {
    if (current_.used == current_.events.size())
      current_.events.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    current_.events[current_.used++]->record();
    current_.marks.push_back(phase);
  }
  static PhaseTimes times(Step& step) {
    PhaseTimes t;
    step.events[step.used - 1]->synchronize();
    for (size_t i = 1; i < step.used; ++i) {
      const double ms = step.events[i - 1]->elapsed_time(*step.events[i]);
      if (step.marks[i] != Phase::count) t[step.marks[i]] += ms;
    }
    t.step_ms = step.events[0]->elapsed_time(*step.events[step.used - 1]);
    return t;
  }
  Step current_, previous_step_;
  bool has_last_ = false, has_previous_ = false;
};
}  // namespace

std::unique_ptr<PhaseTimer> make_cuda_event_timer() {
  return std::make_unique<CudaEventTimer>();
}
#else
std::unique_ptr<PhaseTimer> make_cuda_event_timer() {
  return nullptr;
}
#endif

namespace {

// LibTorch 2 split c10d's ProcessGroup into a ProcessGroup front and Backends;
// Gloo and NCCL are Backends there and ProcessGroups in 1.x.
#if TORCH_VERSION_MAJOR >= 2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

class C10dPending final : public PendingCollective {
 public:
  using WorkPtr = decltype(std::declval<CollectiveGroup&>().allreduce(
      std::declval<std::vector<at::Tensor>&>()));
  explicit C10dPending(WorkPtr work) : work_(std::move(work)) {
    // The future's callback notes when the operation really ended, which for
    // an overlapped bucket is long before anyone waits on it.
    auto completed = completed_;
    work_->getFuture()->addCallback([completed](c10::ivalue::Future&) { note_now(*completed); });
  }
  void wait() override {
    work_->wait();
    // The callback may not have run yet when wait() returns; then this is the
    // earliest moment the operation is known to have ended.
    note_now(*completed_);
  }
  std::chrono::steady_clock::time_point completed_at() const override {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(completed_->load()));
  }

 private:
  // The first of the callback and wait() to see the end wins.
  static void note_now(std::atomic<int64_t>& completed) {
    int64_t unset = 0;
    completed.compare_exchange_strong(unset,
                                      std::chrono::steady_clock::now().time_since_epoch().count());
  }
  WorkPtr work_;
  std::shared_ptr<std::atomic<int64_t>> completed_ = std::make_shared<std::atomic<int64_t>>(0);
};

// Point-to-point work has no future in every version (Gloo's send/recv work
// in 1.13 throws on getFuture()): its end is the moment wait() returns.
class C10dWaited final : public PendingCollective {
 public:
  using WorkPtr = C10dPending::WorkPtr;
  explicit C10dWaited(WorkPtr work) : work_(std::move(work)) {}
  void wait() override {
    work_->wait();
    completed_ = std::chrono::steady_clock::now();
  }
  std::chrono::steady_clock::time_point completed_at() const override { return completed_; }

 private:
  WorkPtr work_;
  std::chrono::steady_clock::time_point completed_;
};

// Gloo's default device binds to what this host's name resolves to, which on
// a multi-homed node (or a network namespace sharing the host name) may be an
// address the peers cannot reach. The address this host uses to reach the
// rendezvous is one the peers can reach it by.
std::shared_ptr<::gloo::transport::Device> gloo_device_towards(const std::string& master_addr,
                                                               int master_port) {
  if (master_addr == "127.0.0.1" || master_addr == "localhost")
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(master_addr.c_str(), std::to_string(master_port).c_str(), &hints, &found) ==
      0) {
    std::string local;
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in self{};
    socklen_t length = sizeof self;
    // A datagram socket's connect() sends nothing; it only picks the route.
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &length) == 0) {
      char text[INET_ADDRSTRLEN] = {};
      if (::inet_ntop(AF_INET, &self.sin_addr, text, sizeof text)) local = text;
    }
    if (fd >= 0) ::close(fd);
    ::freeaddrinfo(found);
    if (!local.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<CollectiveGroup> make_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, bool cuda,
    std::chrono::milliseconds timeout,
    const std::shared_ptr<::gloo::transport::Device>& gloo_device) {
  if (cuda) {
#if defined(FLOTILLA_WITH_CUDA) && defined(USE_C10D_NCCL)
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
    throw std::runtime_error("this LibTorch (" + torch_version() + ") has no NCCL");
#endif
  }
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  options->devices.push_back(gloo_device);
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

class C10dGroup final : public ProcessGroupAdapter {
 public:
  C10dGroup(c10::intrusive_ptr<c10d::Store> store, int rank, int size, bool cuda,
            std::chrono::milliseconds timeout,
            std::shared_ptr<::gloo::transport::Device> gloo_device)
      : store_(std::move(store)),
        group_(make_group(store_, rank, size, cuda, timeout, gloo_device)),
        cuda_(cuda),
        timeout_(timeout),
        gloo_device_(std::move(gloo_device)) {}
  void allreduce_sum(std::vector<at::Tensor>& tensors) override {
    group_->allreduce(tensors)->wait();
  }
  std::unique_ptr<PendingCollective> allreduce_sum_async(at::Tensor tensor) override {
    std::vector<at::Tensor> one{std::move(tensor)};
    return std::make_unique<C10dPending>(group_->allreduce(one));
  }
  std::unique_ptr<PendingCollective> send_async(at::Tensor tensor, int to, int tag) override {
    std::vector<at::Tensor> one{std::move(tensor)};
    return std::make_unique<C10dWaited>(group_->send(one, to, tag));
  }
  std::unique_ptr<PendingCollective> recv_async(at::Tensor tensor, int from, int tag) override {
    std::vector<at::Tensor> one{std::move(tensor)};
    return std::make_unique<C10dWaited>(group_->recv(one, from, tag));
  }
  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    group_->broadcast(tensors, options)->wait();
  }
  void barrier() override { group_->barrier()->wait(); }
  std::unique_ptr<ProcessGroupAdapter> subgroup(const std::string& name, int rank,
                                                int size) override {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, store_);
    return std::make_unique<C10dGroup>(std::move(prefixed), rank, size, cuda_, timeout_,
                                       gloo_device_);
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<CollectiveGroup> group_;
  bool cuda_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<::gloo::transport::Device> gloo_device_;  // null on NCCL
};

}  // namespace

std::unique_ptr<ProcessGroupAdapter> ProcessGroupAdapter::connect(
    const DistributedEnv& env, bool cuda, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env.master_port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = static_cast<size_t>(env.world_size);
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  } catch (const std::exception& e) {
    throw std::runtime_error("rendezvous at " + env.master_addr + ":" +
                             std::to_string(env.master_port) + " failed: " + e.what());
  }
  return std::make_unique<C10dGroup>(
      std::move(store), static_cast<int>(env.rank), static_cast<int>(env.world_size), cuda, timeout,
      cuda ? nullptr : gloo_device_towards(env.master_addr, env.master_port));
}

// LibTorch 2.4 replaced at::autocast's cpu_/gpu_-named calls by ones that
// take the device type (the old ones remain, deprecated).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define FLOTILLA_AUTOCAST_PER_DEVICE 1
#endif

namespace {

bool autocast_enabled(bool cuda) {
#ifdef FLOTILLA_AUTOCAST_PER_DEVICE
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

void set_autocast_enabled(bool cuda, bool enabled) {
#ifdef FLOTILLA_AUTOCAST_PER_DEVICE
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, enabled);
#else
  if (cuda)
    at::autocast::set_enabled(enabled);
  else
    at::autocast::set_cpu_enabled(enabled);
#endif
}

at::ScalarType autocast_dtype(bool cuda) {
#ifdef FLOTILLA_AUTOCAST_PER_DEVICE
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
#else
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

void set_autocast_dtype(bool cuda, at::ScalarType dtype) {
#ifdef FLOTILLA_AUTOCAST_PER_DEVICE
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
#else
  if (cuda)
    at::autocast::set_autocast_gpu_dtype(dtype);
  else
    at::autocast::set_autocast_cpu_dtype(dtype);
#endif
}

}  // namespace

AutocastScope::AutocastScope(bool cuda, c10::ScalarType dtype)
    : cuda_(cuda), active_(dtype != at::kFloat), previous_dtype_(dtype) {
  if (!active_) return;
  was_enabled_ = autocast_enabled(cuda);
  previous_dtype_ = autocast_dtype(cuda);
  set_autocast_dtype(cuda, dtype);
  set_autocast_enabled(cuda, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cached low-precision copies of the parameters are stale once the
  // optimizer steps: dropped when the outermost scope ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(cuda_, was_enabled_);
  set_autocast_dtype(cuda_, previous_dtype_);
}

std::string autocast_problem(bool cuda, c10::ScalarType dtype) {
  if (dtype == at::kFloat) return "";
  try {
    const auto options = at::TensorOptions().device(cuda ? at::kCUDA : at::kCPU);
    auto weight = torch::randn({4, 2, 3, 3}, options).requires_grad_(true);
    auto dense = torch::randn({3, 16}, options).requires_grad_(true);
    const auto images = torch::randn({2, 2, 4, 4}, options);
    torch::Tensor loss;
    {
      AutocastScope scope(cuda, dtype);
      auto features = torch::max_pool2d(
          torch::conv2d(images, weight, torch::Tensor(), /*stride=*/1, /*padding=*/1).relu(), 2);
      auto logits = torch::linear(features.flatten(1), dense);
      if (logits.scalar_type() != dtype)
        return std::string("autocast left a linear layer's output in ") +
               c10::toString(logits.scalar_type());
      loss = logits.to(at::kFloat).sum();
    }
    loss.backward();
    return "";
  } catch (...) {
    return error_message(std::current_exception());
  }
}

bool allreduces(bool cuda, c10::ScalarType dtype) {
  if (cuda || dtype == at::kFloat) return true;
  static std::mutex mutex;
  static std::map<at::ScalarType, bool> known;
  std::lock_guard lock(mutex);
  if (auto it = known.find(dtype); it != known.end()) return it->second;
  bool works = false;
  try {
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto alone = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::HashStore>(),
                                                             0, 1, options);
    std::vector<at::Tensor> values{torch::ones({4}, at::TensorOptions().dtype(dtype))};
    alone->allreduce(values)->wait();
    works = values[0].to(at::kFloat).eq(1).all().item<bool>();
  } catch (const std::exception&) {
    works = false;
  }
  known[dtype] = works;
  return works;
}

namespace {

at::Tensor& leave_as_allocated(at::Tensor& self, double, double, c10::optional<at::Generator>) {
  return self;
}

// The guard's namespace moved in LibTorch 2.
#if TORCH_VERSION_MAJOR >= 2
using WarningHandlerGuard = c10::WarningUtils::WarningHandlerGuard;
#else
using WarningHandlerGuard = c10::Warning::WarningHandlerGuard;
#endif

}  // namespace

struct RandomInitialisationSkipped::Registration {
  // Replacing a registered kernel is announced with a warning; here it is
  // the point. The handler's signature moved in LibTorch 2.
  class QuietWarnings final : public c10::WarningHandler {
   public:
#if TORCH_VERSION_MAJOR >= 2
    void process(const c10::Warning&) override {}
#else
    void process(const c10::SourceLocation&, const std::string&, const bool) override {}
#endif
  };
  QuietWarnings quiet;
  torch::Library library{torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__};
};

RandomInitialisationSkipped::RandomInitialisationSkipped()
    : registration_(std::make_unique<Registration>()) {
  WarningHandlerGuard quiet(&registration_->quiet);
  registration_->library.impl("uniform_", &leave_as_allocated);
  registration_->library.impl("normal_", &leave_as_allocated);
}

// Dropping the library's registrations brings LibTorch's own kernels back.
RandomInitialisationSkipped::~RandomInitialisationSkipped() = default;

bool is_out_of_memory(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::OutOfMemoryError&) {
    return true;
  } catch (const std::bad_alloc&) {
    return true;
  } catch (const c10::Error& e) {
    // LibTorch's CPU allocator reports failure as a plain c10::Error.
    const std::string what = e.what_without_backtrace();
    return what.find("DefaultCPUAllocator: not enough memory") != std::string::npos ||
           what.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos;
  } catch (...) {
  }
  return false;
}

std::string error_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    // Keep the first line: the rest is LibTorch's source location trail.
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return what;
  } catch (const std::bad_alloc&) {
    return "out of memory (std::bad_alloc)";
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace flotilla
