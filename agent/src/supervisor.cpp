#include "supervisor.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/metric_records.h"
#include "flotilla/protocol/numbers.h"
#include "memory_watchdog.h"
#include "processes.h"
#include "rank_records.h"
#include "run_directory.h"
#include "slurm_job.h"
#include "spool.h"
#include "system_metrics.h"

namespace flotilla::agent {
namespace {

// The signals the supervisor reads from its signalfd. Blocked in every thread
// or a process-directed one may go to a thread that has it unblocked, and its
// default action ends the supervisor with no run_end.
sigset_t supervisor_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGHUP);
  return set;
}

using Clock = std::chrono::steady_clock;

// How long a rank may take to load its data and meet its peers before its
// first record: the engine's rendezvous gives up after 5 minutes.
constexpr std::chrono::seconds kRendezvousAllowance{300};

// Seconds since the Unix epoch on this node's clock, to the microsecond.
double wall_seconds() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() /
         1e6;
}

// A rank's command line: training, the all-reduce sweep of `nodes bench`
// with the limits the controller set (the engine's defaults for the rest),
// or the block profile of `nodes profile`.
std::vector<std::string> train_arguments(const protocol::StartRun& start, const std::string& binary,
                                         const std::string& config_file) {
  std::vector<std::string> argv{binary, "--config", config_file, "--records", "-"};
  if (start.resume) argv.push_back("--resume");
  if (start.mode == protocol::RunMode::block_profile) argv.push_back("--profile-blocks");
  if (start.mode != protocol::RunMode::allreduce_bench) return argv;
  argv.push_back("--allreduce-bench");
  for (const auto& [flag, value] : {std::pair{"--min-bytes", start.bench.min_bytes},
                                    {"--max-bytes", start.bench.max_bytes},
                                    {"--iterations", start.bench.iterations},
                                    {"--warmup", start.bench.warmup}})
    if (value > 0) {
      argv.push_back(flag);
      argv.push_back(std::to_string(value));
    }
  return argv;
}

// Room kept on the run directory's file system for the run's end. When the
// spool's disk fills up, this file goes, so that the run_end line and the
// final state can still be written and the controller hears how the run ended.
class DiskReserve {
 public:
  explicit DiskReserve(std::filesystem::path file) : file_(std::move(file)) {
    std::ofstream out(file_, std::ios::binary | std::ios::trunc);
    const std::string block(4096, '\0');
    for (int i = 0; i < kBlocks && out; ++i) out.write(block.data(), block.size());
    // A disk too full for it fails the spool's first line anyway.
  }
  ~DiskReserve() { release(); }
  void release() {
    std::error_code ignored;
    std::filesystem::remove(file_, ignored);
  }

 private:
  static constexpr int kBlocks = 16;  // 64 KiB: a run_end and final.json, many times over
  std::filesystem::path file_;
};

struct Rank {
  int64_t rank = 0;
  ChildProcess process;
  protocol::LineBuffer out, err;
  std::ofstream log;
  std::deque<std::string> last_err;  // the last lines of stderr, for the failure message
  std::optional<RankEnd> end;        // what its end record said, when it wrote a well-formed one
  Clock::time_point last_record;     // when it last wrote a record (or started)
  bool wrote_record = false;
  std::optional<int64_t> last_step;
  bool exited = false;
  int status = 0;
  bool killed_for_memory = false;  // by the memory watchdog, which said why
};

class Supervisor {
 public:
  explicit Supervisor(const SupervisorOptions& options)
      : options_(options),
        dir_(options.home, options.run),
        start_(dir_.read_start()),
        reserve_(dir_.path() / "spool.reserve"),
        spool_(dir_.spool()),
        stall_timeout_s_(stall_timeout_s(start_.config_json)) {
    if (const int64_t limit = rank_memory_limit_bytes(start_.config_json); limit > 0)
      memory_watchdog_.emplace(limit);
  }

  int run() {
    block_signals();
    const auto self = read_identity(getpid());
    if (!self) throw std::runtime_error("cannot read this supervisor's own /proc/self/stat");
    dir_.write_supervisor(*self);
    start_ranks();
    auto next_sample = Clock::now();
    auto next_memory_check = Clock::now();
    while (!all_exited()) {
      if (Clock::now() >= next_sample) {
        sample_system();
        next_sample =
            Clock::now() + std::chrono::milliseconds(int(options_.sample_interval_s * 1000));
      }
      if (memory_watchdog_ && Clock::now() >= next_memory_check) {
        check_memory();
        next_memory_check = Clock::now() + kMemoryWatchInterval;
      }
      wait_for_events(memory_watchdog_ ? std::min(next_sample, next_memory_check) : next_sample);
      check_stalls();
      if (stopping_ && Clock::now() >= kill_deadline_) signal_groups(groups_, SIGKILL);
    }
    drain_outputs();
    finish();
    return 0;
  }

 private:
  void block_signals() {
    const sigset_t set = supervisor_signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  }

  void start_ranks() {
    const auto config = start_.config_json;
    write_file_atomically(dir_.config_file(), config);
    int64_t local = 0;
    for (int64_t rank : start_.ranks) {
      auto r = std::make_unique<Rank>();
      r->rank = rank;
      create_private_file(dir_.rank_log(rank));  // 0600 before the stream opens it
      r->log.open(dir_.rank_log(rank), std::ios::app);
      // No OPENBLAS_NUM_THREADS: the engine sizes OpenBLAS's pool to the
      // rank's threads itself (set_compute_threads), so two ranks on two
      // cores run one BLAS thread each; setting it here changed nothing measured.
      r->process = spawn_in_new_group(
          train_arguments(start_, options_.train_binary.string(), dir_.config_file().string()),
          {{"RANK", std::to_string(rank)},
           {"WORLD_SIZE", std::to_string(start_.world_size)},
           {"LOCAL_RANK", std::to_string(local++)},
           {"MASTER_ADDR", start_.master_addr},
           {"MASTER_PORT", std::to_string(start_.master_port)},
           {"FLOTILLA_RUN", start_.run}});
      r->last_record = Clock::now();
      if (memory_watchdog_) memory_watchdog_->watch(rank, r->process.group);
      groups_.push_back(r->process.group);
      ranks_.push_back(std::move(r));
      // Known before the next spawn: if that one fails, whoever ends the run
      // finds every group already started and stops it.
      dir_.write_process_groups(groups_);
    }
  }

  // `limits.memory_mb` of a CPU run, in bytes (0: none). A GPU run's limit is
  // on the GPU, which the engine sets itself: its host memory stays free.
  static int64_t rank_memory_limit_bytes(const std::string& config_json) {
    const auto config = nlohmann::json::parse(config_json, nullptr, false);
    if (!config.is_object() || config.value("device", std::string("cpu")) != "cpu") return 0;
    const auto limits = config.find("limits");
    if (limits == config.end() || !limits->is_object()) return 0;
    const auto memory_mb = limits->find("memory_mb");
    if (memory_mb == limits->end() || !memory_mb->is_number_integer()) return 0;
    // Clamped so that the shift cannot overflow: such a limit is no limit in practice.
    const int64_t mib = std::clamp<int64_t>(memory_mb->get<int64_t>(), 0,
                                            std::numeric_limits<int64_t>::max() >> 20);
    return mib << 20;
  }

  // `stall_timeout_s` of the config (0: never). A config of an older
  // controller lacks it and gets the parser's default.
  static int64_t stall_timeout_s(const std::string& config_json) {
    const auto config = nlohmann::json::parse(config_json, nullptr, false);
    const auto timeout = config.is_object() ? config.find("stall_timeout_s") : config.end();
    if (!config.is_object() || timeout == config.end() || !timeout->is_number_integer())
      return kDefaultStallTimeoutSeconds;
    return std::max<int64_t>(0, timeout->get<int64_t>());
  }

  // Ranks that wrote no record for stall_timeout_s: a collective whose peer is
  // gone, a frozen process, an allocator retrying forever. The run ends
  // failed, naming each such rank and its last step, and its ranks are stopped.
  void check_stalls() {
    if (stall_timeout_s_ <= 0 || stopping_) return;
    const auto now = Clock::now();
    std::string stalled;
    for (const auto& r : ranks_) {
      // A rank's first record comes after it loaded its data and met its
      // peers, which has its own time limit: the watchdog allows that too,
      // or a short stall_timeout_s fails a run on a busy node as it starts.
      const auto allowed = std::chrono::seconds(stall_timeout_s_) +
                           (r->wrote_record ? std::chrono::seconds(0) : kRendezvousAllowance);
      if (r->exited || now - r->last_record < allowed) continue;
      stalled += (stalled.empty() ? "rank " : ", rank ") + std::to_string(r->rank) +
                 " (last step " + (r->last_step ? std::to_string(*r->last_step) : "none") + ")";
    }
    if (stalled.empty()) return;
    const std::string message =
        "stalled: no record for " + std::to_string(stall_timeout_s_) + " s from " + stalled;
    failures_.push_back({"failed", message, wall_seconds()});
    request_stop("failed", message);
  }

  // Ranks of a CPU run with `limits.memory_mb` beyond it: each is SIGKILLed
  // and the run ends `oom` naming it, what it held and the limit. Also while
  // stopping: a rank that grows in its grace period is the node's problem too
  // (a failure after the first, or after a stop on request, changes no outcome).
  void check_memory() {
    for (const auto& overrun : memory_watchdog_->check()) {
      const double at = wall_seconds();
      const auto batch = batch_size();
      const std::string words =
          memory_overrun_words(overrun, memory_watchdog_->limit_bytes(), batch);
      for (auto& r : ranks_) {
        if (r->rank != overrun.rank) continue;
        r->killed_for_memory = true;
        if (!r->end) write_oom_end(*r, words, batch, at);  // one end a rank, its own first
      }
      failures_.push_back({"oom", "rank " + std::to_string(overrun.rank) + ": " + words, at});
      request_stop("oom", failures_.back().message);
    }
  }

  // The end record a killed rank cannot write, as the engine writes it when
  // LibTorch's allocator fails, so that the run's records read the same either
  // way (its outcome and batch are what a sweep's ladder and the compare
  // table read). Steps are those its step records counted; epochs and
  // elapsed_s stay 0, as in the engine's own OOM end, which is written before
  // the trainer could say them.
  void write_oom_end(Rank& r, const std::string& words, std::optional<int64_t> batch, double at) {
    records::End end;
    end.rank = r.rank;
    end.outcome = records::Outcome::oom;
    end.message = words;
    end.batch_size = batch.value_or(0);
    end.steps = r.last_step.value_or(0);
    end.wall_time = at;
    if (auto line = read_rank_line(records::to_line(end), at))
      append_record(r.rank, std::move(line->record_json));
  }

  // The config's batch_size, for the words of an OOM; nothing when it has none.
  std::optional<int64_t> batch_size() const {
    const auto config = nlohmann::json::parse(start_.config_json, nullptr, false);
    const auto batch = config.is_object() ? config.find("batch_size") : config.end();
    if (!config.is_object() || batch == config.end() || !batch->is_number_integer())
      return std::nullopt;
    return batch->get<int64_t>();
  }

  bool all_exited() const {
    for (const auto& r : ranks_)
      if (!r->exited || r->process.stdout_fd >= 0 || r->process.stderr_fd >= 0) return false;
    return true;
  }

  void wait_for_events(Clock::time_point until) {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    for (const auto& r : ranks_) {
      if (r->process.stdout_fd >= 0) fds.push_back({r->process.stdout_fd, POLLIN, 0});
      if (r->process.stderr_fd >= 0) fds.push_back({r->process.stderr_fd, POLLIN, 0});
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (stopping_) wait = std::min<long>(wait, 100);
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(0, wait)));
    handle_signals();
    for (auto& r : ranks_) {
      read_pipe(*r, r->process.stdout_fd, true);
      read_pipe(*r, r->process.stderr_fd, false);
    }
    reap();
  }

  void handle_signals() {
    signalfd_siginfo info{};
    while (read(signal_fd_, &info, sizeof info) == sizeof info) {
      if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT || info.ssi_signo == SIGHUP) {
        if (!outcome_) request_stop("killed", stop_why());
      }
    }
  }

  void request_stop(const std::string& outcome, const std::string& message) {
    if (!outcome_) {
      outcome_ = outcome;
      message_ = message;
    }
    if (stopping_) return;
    stopping_ = true;
    signal_groups(groups_, SIGTERM);
    // A stopped (frozen) rank acts on the SIGTERM only once it runs again.
    signal_groups(groups_, SIGCONT);
    kill_deadline_ = Clock::now() + std::chrono::milliseconds(int(start_grace_s() * 1000));
  }

  // Why the controller stopped the run, when it says (another node failed).
  std::string stop_why() const {
    std::ifstream in(dir_.path() / "stop_why");
    std::string text;
    std::getline(in, text);
    return text.empty() ? protocol::kStoppedOnRequest : text;
  }

  double start_grace_s() const {
    std::ifstream in(dir_.path() / "stop_grace_s");
    std::string text;
    std::getline(in, text);
    return parse_number(text).value_or(5.0);
  }

  void read_pipe(Rank& r, int& fd, bool records) {
    if (fd < 0) return;
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        auto& lines = records ? r.out : r.err;
        lines.feed(
            {buffer, static_cast<size_t>(n)},
            [&](std::string_view line) { records ? on_record(r, line) : on_stderr(r, line); },
            [&](size_t bytes) {
              ++malformed_;
              on_stderr(r, "(an overlong line of " + std::to_string(bytes) + " bytes)");
            });
        if (n == static_cast<ssize_t>(sizeof buffer)) continue;
        return;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n == 0 || n < 0) {
        close(fd);
        fd = -1;
        return;
      }
    }
  }

  void on_record(Rank& r, std::string_view line) {
    auto record = read_rank_line(line, wall_seconds());
    if (!record) {
      ++malformed_;
      on_stderr(r, "(not a record) " + printable(line.substr(0, 200)));
      return;
    }
    r.last_record = Clock::now();
    r.wrote_record = true;
    if (record->step) r.last_step = record->step;
    if (record->is_end) {
      r.end = read_rank_end(record->record_json);
      if (!r.end) {
        ++malformed_;
        on_stderr(r, "(a malformed end record) " + printable(line.substr(0, 200)));
      }
    }
    append_record(r.rank, std::move(record->record_json));
  }

  // A malformed line as the rank's log shows it: control bytes (a NUL) as '?'.
  static std::string printable(std::string_view text) {
    std::string out(text);
    for (char& c : out)
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    return out;
  }

  void on_stderr(Rank& r, std::string_view line) {
    r.log << line << '\n';
    r.log.flush();
    r.last_err.emplace_back(line);
    if (r.last_err.size() > 20) r.last_err.pop_front();
  }

  // Once the spool cannot grow, the run is over: its ranks are stopped and
  // what they write from then on is counted, not kept (the reserve is for the
  // run's end).
  void append_record(int64_t rank, std::string record_json) {
    if (spool_refused_) {
      ++unspooled_;
      return;
    }
    protocol::Record record{start_.run, spool_.next_seq(),      start_.node,
                            rank,       std::move(record_json), /*record_type=*/{}};
    try {
      spool_.append(protocol::encode(record));
    } catch (const SpoolWriteError& e) {
      spool_refused_ = true;
      ++unspooled_;
      failures_.push_back({"failed", e.what(), wall_seconds()});
      request_stop("failed", e.what());
    }
  }

  void sample_system() {
    std::map<int64_t, pid_t> live;
    for (const auto& r : ranks_)
      if (!r->exited) live[r->rank] = r->process.pid;
    append_record(-1, sampler_.sample(live, wall_seconds()));
  }

  void reap() {
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (auto& r : ranks_) {
        if (r->process.pid != pid) continue;
        r->exited = true;
        r->status = status;
        if (memory_watchdog_) memory_watchdog_->forget(r->rank);
        const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!clean) on_rank_failed(*r);
      }
    }
  }

  void on_rank_failed(Rank& r) {
    // Let the pipes drain so the rank's last words are in.
    read_pipe(r, r.process.stdout_fd, true);
    read_pipe(r, r.process.stderr_fd, false);
    // Its SIGKILL was the watchdog's, whose words are on record already.
    if (r.killed_for_memory) return;
    std::string outcome = "failed", message;
    if (r.end) {
      outcome = r.end->outcome;
      message = r.end->message;
    }
    if (message.empty()) {
      for (const auto& line : r.last_err) message += (message.empty() ? "" : "\n") + line;
      if (WIFSIGNALED(r.status))
        message += (message.empty() ? "" : "\n") + std::string("killed by signal ") +
                   std::to_string(WTERMSIG(r.status));
    }
    if (outcome_ == "killed") return;  // stopping on request: these exits are ours
    const double at = r.end ? r.end->wall_time : kNoWallTime;
    failures_.push_back({outcome == "finished" ? "failed" : outcome,
                         "rank " + std::to_string(r.rank) + ": " + message, at});
    request_stop(failures_.back().outcome, failures_.back().message);
  }

  // One rank's failure makes its peers fail in their collectives ("connection
  // closed by peer"), and any of them may be reaped first: the cause is the
  // failure that happened first.
  void settle_failure() {
    if (failures_.empty() || outcome_ == "killed") return;
    const auto first = std::min_element(failures_.begin(), failures_.end(),
                                        [](const auto& a, const auto& b) { return a.at < b.at; });
    outcome_ = first->outcome;
    message_ = first->message;
  }

  void drain_outputs() {
    for (auto& r : ranks_) {
      read_pipe(*r, r->process.stdout_fd, true);
      read_pipe(*r, r->process.stderr_fd, false);
    }
  }

  void finish() {
    settle_failure();
    // A run is over only when no process of it is left, whatever the ranks said.
    if (const auto left = kill_groups(groups_); !left.empty()) {
      // Uninterruptible processes: say so rather than claim the run is over.
      outcome_ = "failed";
      message_ += (message_.empty() ? "" : "\n") + survivors_words(left);
    }
    sample_system();
    if (malformed_ > 0)
      message_ += (message_.empty() ? "" : "\n") + std::to_string(malformed_) +
                  " malformed record line(s) from the ranks, kept in their rank-N.log";
    if (spool_refused_)
      message_ += "; the ranks were stopped; every record before it is in the spool, " +
                  std::to_string(unspooled_) + " record(s) from then on were not kept";
    reserve_.release();
    const std::string outcome = outcome_.value_or("finished");
    protocol::RunEnd end{start_.run, spool_.next_seq(), outcome, message_};
    spool_.append(protocol::encode(end));
    dir_.write_final({outcome, message_, spool_.last_seq()});
  }

  SupervisorOptions options_;
  RunDirectory dir_;
  protocol::StartRun start_;
  DiskReserve reserve_;
  SpoolWriter spool_;
  bool spool_refused_ = false;
  int64_t unspooled_ = 0;
  int64_t stall_timeout_s_;
  SystemSampler sampler_;
  std::optional<MemoryWatchdog> memory_watchdog_;  // with limits.memory_mb on a CPU run
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<ProcessGroupRecord> groups_;  // as recorded in pgids.json
  int signal_fd_ = -1;
  bool stopping_ = false;
  Clock::time_point kill_deadline_;
  std::optional<std::string> outcome_;
  struct Failure {
    std::string outcome, message;
    double at;  // the rank's own wall time of failing, kNoWallTime when it could not say
  };
  std::vector<Failure> failures_;
  std::string message_;
  int64_t malformed_ = 0;
};

// A SLURM part's run and rendezvous, from what srun tells its task; false
// (said on stderr, which is the job's output file) without them.
bool take_slurm_part(SupervisorOptions& options) {
  const char* node_id = std::getenv("SLURM_NODEID");
  const char* job_id = std::getenv("SLURM_JOB_ID");
  const char* launch_node = std::getenv("SLURM_LAUNCH_NODE_IPADDR");
  const auto node = node_id ? parse_number(node_id) : std::nullopt;
  if (!node || *node < 0 || *node != static_cast<double>(static_cast<int64_t>(*node)) || !job_id ||
      !launch_node) {
    std::cerr << "flotilla-agent supervise --slurm-part: run it through srun (SLURM_NODEID, "
                 "SLURM_JOB_ID and SLURM_LAUNCH_NODE_IPADDR are not all set)\n";
    return false;
  }
  const char* restart_count = std::getenv("SLURM_RESTART_COUNT");  // set once requeued
  const auto restarts =
      static_cast<int64_t>(restart_count ? parse_number(restart_count).value_or(0) : 0);
  const auto parts_home = options.home;
  // Where this run of the job keeps the part, before anything can fail: a
  // failure from here on ends the part in its spool, which the login follows.
  options.home = slurm_attempt_home(parts_home, job_id, restarts);
  options.run = slurm_part_run(static_cast<int64_t>(*node));
  auto start = std::get<protocol::StartRun>(
      protocol::decode(read_file(slurm_part_start_file(parts_home, static_cast<int64_t>(*node)))));
  start.master_addr = launch_node;
  start.master_port = slurm_master_port(job_id, restarts);
  // A requeued job goes on from the newest checkpoint every rank holds,
  // kept where each run of the job finds them.
  start.resume = start.resume || restarts > 0;
  start.config_json = with_run_folder_checkpoints(start.config_json, parts_home.parent_path());
  RunDirectory(options.home, options.run).write_start(start);
  return true;
}

}  // namespace

int run_supervisor(const SupervisorOptions& options_in) {
  // Before any thread exists: threads inherit the mask, and loading NVML (the
  // system sampler, a member) starts threads of its own.
  const sigset_t signals = supervisor_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  SupervisorOptions options = options_in;
  try {
    if (options.slurm_part && !take_slurm_part(options)) return 2;
    return Supervisor(options).run();
  } catch (const std::exception& e) {
    std::cerr << "flotilla-agent supervise " << options.run << ": " << e.what() << "\n";
    try {
      RunDirectory dir(options.home, options.run);
      // Ranks started before the failure (a later spawn failed) go with it;
      // what pgids.json names but is not theirs is said and left alone.
      const auto recorded = dir.process_groups();
      std::string message = e.what();
      for (const auto& words : recorded.strangers()) message += "; " + words;
      if (const auto left = kill_groups(recorded.groups); !left.empty())
        message += "; " + survivors_words(left);
      dir.write_final(
          {"failed", message, append_run_end(dir.spool(), options.run, "failed", message)});
    } catch (...) {
    }
    return 1;
  }
}

}  // namespace flotilla::agent
