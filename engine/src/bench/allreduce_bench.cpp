#include "flotilla/engine/allreduce_bench.h"

#include <torch/torch.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "flotilla/protocol/numbers.h"
#include "runtime/thread_pools.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

constexpr int64_t kElementBytes = sizeof(float);

std::vector<int64_t> message_sizes(const AllreduceBenchOptions& o) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor)
    sizes.push_back(bytes);
  return sizes;
}

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

void print_header(std::ostream& out, const AllreduceBenchOptions& o, const std::string& backend) {
  out << "all-reduce of float32 over " << o.env.world_size << " ranks (" << backend << "), "
      << o.iterations << " iterations after " << o.warmup << " warm-up, time averaged over ranks\n"
      << std::setw(12) << "bytes" << std::setw(12) << "elements" << std::setw(12) << "time_us"
      << std::setw(13) << "algbw_GB/s" << std::setw(13) << "busbw_GB/s"
      << "\n";
}

void print_row(std::ostream& out, const records::Bench& r) {
  out << std::setw(12) << r.bytes << std::setw(12) << r.elements << std::setw(12)
      << format_fixed(r.time_us, 1) << std::setw(13) << format_fixed(r.algbw_gbps, 3)
      << std::setw(13) << format_fixed(r.busbw_gbps, 3) << "\n"
      << std::flush;
}

// One size: `warmup` untimed, then `iterations` back to back; the mean per
// operation on this rank, in microseconds. On CUDA the operations queue on
// NCCL's stream and the clock stops once the device has run them all.
double time_allreduce(Communicator& comm, torch::Tensor message, const AllreduceBenchOptions& o) {
  std::vector<torch::Tensor> one{std::move(message)};
  for (int64_t i = 0; i < o.warmup; ++i) comm.allreduce_sum(one);
  synchronize(one[0].device());
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.iterations; ++i) comm.allreduce_sum(one);
  synchronize(one[0].device());
  const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
  return took.count() / static_cast<double>(o.iterations);
}

// One size between two ranks, as a pipeline's boundary crosses: `from`
// sends, `to` receives and sends it back; the one-way time is half a round
// trip (nccl-tests' sendrecv), measured on `from`, in microseconds.
double time_send_receive(Communicator& comm, torch::Tensor message, int64_t from, int64_t to,
                         const AllreduceBenchOptions& o) {
  constexpr int kTag = 71;
  const bool sender = comm.rank() == from;
  const int64_t peer = sender ? to : from;
  const auto round_trip = [&] {
    auto first =
        sender ? comm.start_send(message, peer, kTag) : comm.start_recv(message, peer, kTag);
    comm.finish(first);
    auto second =
        sender ? comm.start_recv(message, peer, kTag) : comm.start_send(message, peer, kTag);
    comm.finish(second);
  };
  for (int64_t i = 0; i < o.warmup; ++i) round_trip();
  synchronize(message.device());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.iterations; ++i) round_trip();
  synchronize(message.device());
  const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
  return took.count() / static_cast<double>(2 * o.iterations);
}

// Threads that keep cores busy with arithmetic until destroyed: a rank's
// compute beside a transfer, without its memory traffic.
class BusyThreads {
 public:
  explicit BusyThreads(int64_t count) {
    for (int64_t i = 0; i < count; ++i)
      threads_.emplace_back([this] {
        double x = 1.0;
        while (!stop_.load(std::memory_order_relaxed)) x = x * 1.0000001 + 1e-9;
        sink_.store(x, std::memory_order_relaxed);
      });
  }
  ~BusyThreads() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }
  BusyThreads(const BusyThreads&) = delete;
  BusyThreads& operator=(const BusyThreads&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::atomic<double> sink_{0};
  std::vector<std::thread> threads_;
};

// nccl-tests report the time averaged over the ranks.
double mean_over_ranks(Communicator& comm, double value, const torch::Device& device) {
  std::vector<torch::Tensor> message{
      torch::full({1}, value, torch::TensorOptions().dtype(torch::kFloat64).device(device))};
  Communicator::Uncounted bookkeeping(comm);
  comm.allreduce_sum(message);
  return message[0].item<double>() / static_cast<double>(comm.size());
}

// A size's record before it is timed.
records::Bench bench_record(const AllreduceBenchOptions& o, const std::string& op, int64_t bytes,
                            int64_t ranks) {
  records::Bench r;
  r.rank = o.env.rank;
  r.op = op;
  r.bytes = bytes;
  r.elements = bytes / kElementBytes;
  r.iterations = o.iterations;
  r.ranks = ranks;
  return r;
}

AllreduceBenchResult sweep(const AllreduceBenchOptions& o) {
  const auto& c = o.config;
  if (auto problems = unsupported_features(c); !problems.empty()) throw ConfigError(problems);
  if (o.env.world_size != c.world_size())
    throw ConfigError({"WORLD_SIZE: " + std::to_string(o.env.world_size) +
                       " ranks from the environment, but the config's ranks_per_node x nodes is " +
                       std::to_string(c.world_size())});
  set_compute_threads(threads_per_rank(c, usable_cores()));
  const bool cuda = c.device == DeviceKind::cuda;
  const torch::Device device =
      cuda ? torch::Device(torch::kCUDA, o.env.local_rank) : torch::Device(torch::kCPU);
  auto comm = Communicator::connect(o.env, cuda, std::chrono::minutes(5));
  const auto sizes = message_sizes(o);

  if (o.sink) {
    records::Start start;
    start.rank = o.env.rank;
    start.world_size = o.env.world_size;
    start.device = device.str();
    start.steps_per_epoch = static_cast<int64_t>(sizes.size());
    start.threads = torch::get_num_threads();
    start.blas = blas_info().name;
    start.blas_threads = blas_threads();
    start.torch_version = torch_version();
    start.engine = engine_program();
    start.machine = machine_boot_id();
    start.cores = usable_cores();
    o.sink->write(records::to_line(start));
  }
  std::ostream* table = o.env.rank == 0 ? o.table : nullptr;
  if (table) print_header(*table, o, cuda ? "NCCL, cuda" : "Gloo, cpu");

  // Zeros stay zeros however often they are summed: no overflow to inf
  // across hundreds of operations on the same buffer.
  auto buffer = torch::zeros({sizes.back() / kElementBytes},
                             torch::TensorOptions().dtype(torch::kFloat32).device(device));
  const double p = static_cast<double>(o.env.world_size);
  AllreduceBenchResult result;
  // The all-reduce of every size; "allreduce_computing" with every rank
  // computing beside it, as DDP's buckets are all-reduced beside a backward
  // that keeps every core busy where ranks share a machine.
  const auto allreduce_sweep = [&](const std::string& op) {
    if (table && op != "allreduce") *table << "all-reduce, every rank computing beside it\n";
    std::optional<BusyThreads> computing;
    if (op != "allreduce") computing.emplace(torch::get_num_threads());
    for (int64_t bytes : sizes) {
      auto r = bench_record(o, op, bytes, o.env.world_size);
      r.time_us =
          mean_over_ranks(*comm, time_allreduce(*comm, buffer.narrow(0, 0, r.elements), o), device);
      r.algbw_gbps = static_cast<double>(bytes) / 1e9 / (r.time_us / 1e6);
      r.busbw_gbps = r.algbw_gbps * 2.0 * (p - 1.0) / p;
      if (o.sink) o.sink->write(records::to_line(r));
      if (table) print_row(*table, r);
      if (op == "allreduce") ++result.sizes;
    }
  };
  allreduce_sweep("allreduce");
  // Then point to point between rank 0 and the first rank of the next node
  // (of its own node with one node): what a pipeline's boundary carries,
  // which a ring all-reduce's figures say only roughly. The other ranks wait.
  // On CPU a second time with every rank computing beside it, as a
  // pipeline's stages do while their activations cross: a transfer then
  // waits for its threads to get a core, and on a VM's vCPUs that costs
  // several times the idle figure (docs/allreduce_bench.md).
  const int64_t peer = o.env.world_size > c.ranks_per_node ? c.ranks_per_node : 1;
  const auto send_receive_sweep = [&](const std::string& op) {
    if (table)
      *table << "send/receive between ranks 0 and " << peer << ", one way"
             << (op == "sendrecv" ? "" : ", every rank computing beside it") << "\n";
    const bool ends = o.env.rank == 0 || o.env.rank == peer;
    std::optional<BusyThreads> computing;
    if (op != "sendrecv") computing.emplace(torch::get_num_threads());
    for (int64_t bytes : sizes) {
      auto r = bench_record(o, op, bytes, 2);
      if (ends) r.time_us = time_send_receive(*comm, buffer.narrow(0, 0, r.elements), 0, peer, o);
      if (o.env.rank != 0) continue;
      r.algbw_gbps = static_cast<double>(bytes) / 1e9 / (r.time_us / 1e6);
      r.busbw_gbps = r.algbw_gbps;
      if (o.sink) o.sink->write(records::to_line(r));
      if (table) print_row(*table, r);
    }
    comm->barrier();
    computing.reset();
  };
  send_receive_sweep("sendrecv");
  if (!cuda) {
    send_receive_sweep("sendrecv_computing");
    allreduce_sweep("allreduce_computing");
  }
  return result;
}

}  // namespace

std::optional<int64_t> parse_byte_size(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [rest, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || value < 0) return std::nullopt;
  int shift = 0;
  if (rest != end) {
    if (rest + 1 != end) return std::nullopt;
    switch (*rest) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        return std::nullopt;
    }
  }
  if (value > (int64_t{1} << (62 - shift))) return std::nullopt;
  return value << shift;
}

std::vector<std::string> allreduce_bench_problems(const AllreduceBenchOptions& o) {
  std::vector<std::string> problems;
  const auto bytes = [](int64_t b) { return std::to_string(b) + " bytes"; };
  if (o.min_bytes < kElementBytes || o.min_bytes % kElementBytes != 0)
    problems.push_back("--min-bytes: must be a positive multiple of 4 (float32 values), got " +
                       bytes(o.min_bytes));
  if (o.max_bytes < o.min_bytes)
    problems.push_back("--max-bytes: must be at least --min-bytes (" + bytes(o.min_bytes) +
                       "), got " + bytes(o.max_bytes));
  if (o.max_bytes > int64_t{1} << 34)
    problems.push_back("--max-bytes: at most 16G, got " + bytes(o.max_bytes));
  if (o.step_factor != 2 && o.step_factor != 4)
    problems.push_back("--step-factor: must be 2 or 4, got " + std::to_string(o.step_factor));
  if (o.iterations < 1)
    problems.push_back("--iterations: must be at least 1, got " + std::to_string(o.iterations));
  if (o.warmup < 0)
    problems.push_back("--warmup: must be 0 or more, got " + std::to_string(o.warmup));
  return problems;
}

AllreduceBenchResult run_allreduce_bench(const AllreduceBenchOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  AllreduceBenchResult result;
  try {
    if (auto problems = allreduce_bench_problems(options); !problems.empty())
      throw ConfigError(problems);
    result = sweep(options);
  } catch (...) {
    const auto error = std::current_exception();
    result.outcome = is_out_of_memory(error) ? records::Outcome::oom : records::Outcome::failed;
    result.message = error_message(error);
  }
  if (options.sink) {
    records::End end;
    end.rank = options.env.rank;
    end.outcome = result.outcome;
    end.message = result.message;
    end.steps = result.sizes;
    end.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    end.wall_time = seconds_since_epoch();
    options.sink->write(records::to_line(end));
  }
  return result;
}

}  // namespace flotilla
