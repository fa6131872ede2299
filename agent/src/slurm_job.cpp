#include "slurm_job.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flotilla/protocol/numbers.h"
#include "processes.h"
#include "run_directory.h"
#include "spool.h"

extern char** environ;

namespace flotilla::agent {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// How often the job's state is asked of slurmctld, and how long the run's
// spool may go without a line before the job's state is said again, even
// unchanged (a job waiting, its parts meeting): the controller takes a node
// that says nothing for 10 s for a frozen one.
constexpr auto kQueryEvery = std::chrono::milliseconds(500);
constexpr auto kSayWaitingEvery = std::chrono::seconds(5);
// After SLURM ended the job, how long the parts have to write their ends: a
// cancelled step gets SIGTERM, then SIGKILL after the site's KillWait
// (30 s by default), and a part SIGKILLed writes none.
constexpr auto kPartsEndWithin = std::chrono::seconds(40);
// How long a job that may be requeued (NODE_FAIL, PREEMPTED) has to come
// back waiting before its state counts as its end.
constexpr auto kRequeueWithin = std::chrono::seconds(30);

struct ProgramOutput {
  int status = -1;   // the exit status; -1 when it could not run or was killed
  std::string text;  // stdout and stderr together
};

// Runs `argv` (found on PATH) without a shell, so that a partition or an
// extra option goes to sbatch as the one argument it is.
ProgramOutput run_program(const std::vector<std::string>& argv) {
  ProgramOutput out;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return out;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The job supervisor blocks its signals for its signalfd; sbatch must not
  // inherit that mask (scancel waits on nothing, but a child of a child might).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    out.text = argv[0] + ": " + std::strerror(spawned);
    return out;
  }
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n > 0) out.text.append(buffer, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

double wall_seconds() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() /
         1e6;
}

std::string field(const std::map<std::string, std::string>& job, const std::string& key) {
  const auto it = job.find(key);
  return it == job.end() ? std::string() : it->second;
}

// The node names of a SLURM node list ("flh[1-3]" -> flh1, flh2, flh3).
std::vector<std::string> hostnames(const std::string& node_list) {
  std::vector<std::string> names;
  if (node_list.empty() || node_list == "(null)") return names;
  const auto out = run_program({"scontrol", "show", "hostnames", node_list});
  if (out.status != 0) return names;
  std::istringstream in(out.text);
  for (std::string line; std::getline(in, line);)
    if (!trimmed(line).empty()) names.push_back(trimmed(line));
  return names;
}

class SlurmJob {
 public:
  explicit SlurmJob(const SlurmJobOptions& options)
      : options_(options),
        dir_(options.home, options.run),
        start_(dir_.read_start()),
        spool_(dir_.spool()) {
    std::vector<std::string> unread;
    config_ = read_experiment(start_.config_json, "start", unread);
    requeue_ = config_.save.enabled();
  }

  int run() {
    const sigset_t set = signals();
    signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    const auto self = read_identity(getpid());
    if (!self) throw std::runtime_error("cannot read this job supervisor's own /proc/self/stat");
    dir_.write_supervisor(*self);
    prepare_parts();
    if (!submit()) return 0;
    auto next_query = Clock::now();
    while (!done()) {
      wait_for_signal(kQueryEvery / 2);
      if (stop_requested_ && !cancelled_) cancel();
      forward_parts();
      if (Clock::now() >= next_query) {
        query_job();
        next_query = Clock::now() + kQueryEvery;
      }
    }
    forward_parts();
    finish();
    return 0;
  }

  static sigset_t signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    return set;
  }

 private:
  struct Part {
    SpoolReader reader;
    std::optional<FinalState> end;
  };

  // Each part's start, which the part takes up as the job runs: the same
  // for every run of the job (a requeued job runs again).
  void prepare_parts() {
    const fs::path parts_home = slurm_parts_home(dir_.path());
    create_private_directories(parts_home);
    for (int64_t k = 0; k < config_.slurm.nodes; ++k)
      write_file_atomically(slurm_part_start_file(parts_home, k),
                            protocol::encode(slurm_part_start(start_, config_.slurm.nodes, k)));
  }

  // The parts of the job's run `restarts` (0, then one more each requeue),
  // followed from their first line.
  void follow_parts(int64_t restarts) {
    restarts_ = restarts;
    parts_.clear();
    const fs::path home = slurm_attempt_home(slurm_parts_home(dir_.path()), job_id_, restarts);
    for (int64_t k = 0; k < config_.slurm.nodes; ++k)
      parts_.push_back(Part{SpoolReader(RunDirectory(home, slurm_part_run(k)).spool()), {}});
  }

  // sbatch; false when it refused (the run has ended, saying why).
  bool submit() {
    const fs::path script = dir_.path() / "job.sh";
    write_file_atomically(script, slurm_batch_script(fs::absolute(options_.agent_binary),
                                                     fs::absolute(slurm_parts_home(dir_.path())),
                                                     fs::absolute(options_.train_binary)));
    auto argv = sbatch_arguments(config_, start_.run, fs::absolute(dir_.path()));
    argv.insert(argv.begin(), "sbatch");
    argv.push_back(script.string());
    const auto out = run_program(argv);
    const std::string id = trimmed(out.text.substr(0, out.text.find(';')));
    if (out.status != 0 || id.empty() ||
        !std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(c); })) {
      end_run("failed", "sbatch refused the job: " + trimmed(out.text));
      return false;
    }
    job_id_ = id;
    write_file_atomically(dir_.path() / "slurm_job", job_id_ + "\n");
    follow_parts(0);
    say_job({{"state", "SUBMITTED"}});
    return true;
  }

  void wait_for_signal(std::chrono::milliseconds timeout) {
    pollfd fd{signal_fd_, POLLIN, 0};
    ::poll(&fd, 1, static_cast<int>(timeout.count()));
    signalfd_siginfo info{};
    while (read(signal_fd_, &info, sizeof info) == sizeof info) stop_requested_ = true;
  }

  void cancel() {
    cancelled_ = true;
    const auto out = run_program({"scancel", job_id_});
    if (out.status != 0) cancel_error_ = trimmed(out.text);
  }

  // Every part's new lines into the run's spool, numbered on; a part's end is kept.
  void forward_parts() {
    for (auto& part : parts_) {
      part.reader.poll([&](std::string_view line) {
        protocol::Message message;
        try {
          message = protocol::decode(line);
        } catch (const std::exception&) {
          return;  // a part's spool holds what its supervisor encoded; nothing else is ours
        }
        if (auto* record = std::get_if<protocol::Record>(&message)) {
          record->seq = spool_.next_seq();
          spool_.append(protocol::encode(*record));
          last_said_ = Clock::now();
        } else if (const auto* end = std::get_if<protocol::RunEnd>(&message)) {
          part.end = FinalState{end->outcome, end->message, end->seq};
        }
      });
    }
  }

  void query_job() {
    const auto out = run_program({"scontrol", "show", "job", "-o", job_id_});
    if (out.status != 0) {
      // Purged (MinJobAge): ended, whatever it ended with. Any other
      // failure (slurmctld restarting, a timeout) says nothing of the job:
      // asked again next time.
      if (out.text.find("Invalid job id") == std::string::npos) return;
      if (!ended_at_) ended_at_ = Clock::now();
      job_gone_ = true;
      return;
    }
    const auto job = parse_scontrol_job(trimmed(out.text));
    const std::string state = field(job, "JobState");
    const std::string reason = field(job, "Reason");
    if (state.empty()) return;
    const bool changed = state != field(job_, "JobState") || reason != field(job_, "Reason");
    // Requeued (a node lost, preempted): the job runs again from the start
    // of its script, its parts resuming from the newest checkpoint; what the
    // run went through so far stays in its spool.
    const auto restarts = static_cast<int64_t>(parse_number(field(job, "Restarts")).value_or(0));
    if (restarts > restarts_) {
      requeued_after_ = requeue_cause();
      follow_parts(restarts);
      hosts_.clear();
      lost_.clear();
      ended_at_.reset();
    }
    // Seen again waiting or running: what looked like its end was a requeue.
    if (!slurm_job_ended(state) && !requeue_states(state)) ended_at_.reset();
    job_ = job;
    // Part K runs on the job's K-th node: known once the job has its nodes.
    if (hosts_.empty() && (state == "RUNNING" || slurm_job_ended(state)))
      hosts_ = hostnames(field(job, "NodeList"));
    if ((slurm_job_ended(state) || requeue_states(state)) && !ended_at_) {
      ended_at_ = Clock::now();
      if (state == "NODE_FAIL") lost_ = down_nodes();
    }
    if (changed || Clock::now() - last_said_ >= kSayWaitingEvery)
      say_job(
          {{"state", state},
           {"reason", reason == "None" ? std::string() : reason},
           {"nodes", field(job, "NodeList") == "(null)" ? std::string() : field(job, "NodeList")},
           {"restarts", std::to_string(std::max<int64_t>(restarts_, 0))},
           {"requeued_after", requeued_after_}});
  }

  // Why SLURM requeued the job, in words, from its last known state: the
  // nodes of it that are down, or its preemption; "" when neither says.
  std::string requeue_cause() const {
    if (const auto down = down_nodes(); !down.empty()) {
      std::string names;
      for (const auto& n : down) names += (names.empty() ? "" : ", ") + n;
      return (down.size() == 1 ? "node " : "nodes ") + names +
             (down.size() == 1 ? " was lost" : " were lost");
    }
    return field(job_, "JobState") == "PREEMPTED" ? "preemption" : "";
  }

  // The job's nodes sinfo says are down or not responding.
  std::vector<std::string> down_nodes() const {
    std::vector<std::string> down;
    const auto out =
        run_program({"sinfo", "-h", "-N", "-n", field(job_, "NodeList"), "-o", "%N|%T"});
    std::istringstream in(out.text);
    for (std::string line; std::getline(in, line);) {
      const auto bar = line.find('|');
      if (bar == std::string::npos) continue;
      const std::string state = trimmed(line.substr(bar + 1));
      if (state.rfind("down", 0) == 0 || state.back() == '*' || state.rfind("fail", 0) == 0)
        if (std::find(down.begin(), down.end(), line.substr(0, bar)) == down.end())
          down.push_back(line.substr(0, bar));
    }
    return down;
  }

  // A record of the job's state in the run's stream (rank -1, as the agent's own).
  void say_job(const std::map<std::string, std::string>& fields) {
    nlohmann::json body = {{"type", "slurm_job"}, {"job", job_id_}, {"wall_time", wall_seconds()}};
    for (const auto& [key, value] : fields) body[key] = value;
    spool_.append(protocol::encode(protocol::Record{start_.run, spool_.next_seq(), start_.node, -1,
                                                    body.dump(), "slurm_job"}));
    last_said_ = Clock::now();
  }

  bool all_parts_ended() const {
    return std::all_of(parts_.begin(), parts_.end(),
                       [](const Part& p) { return p.end.has_value(); });
  }

  // States a job may leave by being requeued (a run that saves checkpoints
  // is submitted --requeue): given a while to come back before they count
  // as its end.
  bool requeue_states(const std::string& state) const {
    return state == "REQUEUED" || state == "REQUEUE_HOLD" || state == "REQUEUE_FED" ||
           (requeue_ && (state == "NODE_FAIL" || state == "PREEMPTED"));
  }

  bool done() const {
    if (!ended_at_) return false;
    if (requeue_states(field(job_, "JobState"))) return Clock::now() - *ended_at_ >= kRequeueWithin;
    // A job cancelled while it waited started no part.
    return hosts_.empty() || all_parts_ended() || Clock::now() - *ended_at_ >= kPartsEndWithin;
  }

  void finish() {
    std::vector<std::string> unended;
    for (size_t k = 0; k < parts_.size(); ++k)
      if (!parts_[k].end) unended.push_back(k < hosts_.size() ? hosts_[k] : slurm_part_run(k));
    if (stop_requested_) {
      std::string why = read_stop_why();
      if (!cancel_error_.empty()) why += "; scancel " + job_id_ + ": " + cancel_error_;
      return end_run("killed", why);
    }
    const auto lost = lost_.empty() ? unended : lost_;
    if (auto slurm = slurm_job_outcome(job_id_, job_, lost))
      return end_run(slurm->outcome, slurm->message);
    // The job ended on its own: the parts say how the run went, the first
    // part that did not finish first.
    for (size_t k = 0; k < parts_.size(); ++k) {
      const auto& end = parts_[k].end;
      if (!end || end->outcome == "finished") continue;
      const std::string host = k < hosts_.size() ? hosts_[k] : slurm_part_run(k);
      return end_run(end->outcome, "node " + host + ": " + end->message);
    }
    if (!unended.empty()) {
      std::string names;
      for (const auto& n : unended) names += (names.empty() ? "" : ", ") + n;
      return end_run("failed", "SLURM job " + job_id_ + " ended (" +
                                   (job_gone_ ? std::string("no longer known to slurmctld")
                                              : field(job_, "JobState")) +
                                   ") but its part on " + names + " never ended");
    }
    end_run("finished", "");
  }

  std::string read_stop_why() const {
    std::ifstream in(dir_.path() / "stop_why");
    std::string text;
    std::getline(in, text);
    return text.empty() ? protocol::kStoppedOnRequest : text;
  }

  void end_run(const std::string& outcome, const std::string& message) {
    spool_.append(
        protocol::encode(protocol::RunEnd{start_.run, spool_.next_seq(), outcome, message}));
    dir_.write_final({outcome, message, spool_.last_seq()});
  }

  SlurmJobOptions options_;
  RunDirectory dir_;
  protocol::StartRun start_;
  ExperimentConfig config_;
  SpoolWriter spool_;
  std::vector<Part> parts_;  // of the job's latest run
  bool requeue_ = false;     // submitted --requeue: it saves checkpoints
  int64_t restarts_ = -1;
  std::string requeued_after_;  // the state the job was in before its latest requeue
  int signal_fd_ = -1;
  std::string job_id_;
  std::map<std::string, std::string> job_;  // scontrol's last answer
  std::vector<std::string> hosts_;          // the allocated nodes, part K on hosts_[K]
  std::vector<std::string> lost_;           // down when SLURM said NODE_FAIL
  std::optional<Clock::time_point> ended_at_;
  bool job_gone_ = false;
  bool stop_requested_ = false;
  bool cancelled_ = false;
  std::string cancel_error_;
  Clock::time_point last_said_;
};

}  // namespace

std::string cancel_slurm_job(const fs::path& run_folder) {
  const fs::path job_file = run_folder / "slurm_job";
  std::error_code ignored;
  if (!fs::exists(job_file, ignored)) return {};
  const std::string job = trimmed(read_file(job_file));
  if (job.empty()) return {};
  const auto out = run_program({"scancel", job});
  return "SLURM job " + job +
         (out.status == 0 ? std::string(" cancelled") : " not cancelled: " + trimmed(out.text));
}

fs::path slurm_parts_home(const fs::path& run_folder) {
  return run_folder / "parts";
}

std::string slurm_part_run(int64_t node_id) {
  return "node-" + std::to_string(node_id);
}

fs::path slurm_part_start_file(const fs::path& parts_home, int64_t node_id) {
  return parts_home / ("start-" + slurm_part_run(node_id) + ".json");
}

fs::path slurm_attempt_home(const fs::path& parts_home, const std::string& job_id,
                            int64_t restarts) {
  return parts_home / ("job-" + job_id + "-" + std::to_string(restarts));
}

protocol::StartRun slurm_part_start(const protocol::StartRun& run_start, int64_t nodes,
                                    int64_t node_id) {
  protocol::StartRun part = run_start;
  const int64_t per_node = nodes > 0 ? static_cast<int64_t>(run_start.ranks.size()) / nodes : 0;
  part.ranks.clear();
  for (int64_t r = 0; r < per_node; ++r) part.ranks.push_back(node_id * per_node + r);
  part.master_addr.clear();
  part.master_port = 0;
  return part;
}

std::string with_run_folder_checkpoints(const std::string& config_json,
                                        const fs::path& run_folder) {
  auto config = nlohmann::json::parse(config_json, nullptr, false);
  if (!config.is_object()) return config_json;
  const auto save = config.find("save");
  if (save == config.end() || !save->is_object()) return config_json;
  const fs::path dir = save->value("dir", std::string("checkpoints"));
  if (dir.is_absolute()) return config_json;
  (*save)["dir"] = (run_folder / dir).string();
  return config.dump();
}

std::vector<std::string> sbatch_arguments(const ExperimentConfig& config, const std::string& run,
                                          const fs::path& run_folder) {
  const SlurmConfig& slurm = config.slurm;
  std::vector<std::string> args{"--parsable", "--job-name=flotilla-" + run,
                                "--nodes=" + std::to_string(slurm.nodes), "--ntasks-per-node=1",
                                // Requeued after a lost node or a preemption, a run
                                // that saves checkpoints goes on from its newest one;
                                // one that saves none would train again from step 0
                                // without a word, so it ends instead, naming the node.
                                config.save.enabled() ? "--requeue" : "--no-requeue",
                                "--open-mode=append", "--chdir=" + run_folder.string(),
                                "--output=" + (run_folder / "slurm-%j.out").string()};
  if (slurm.gpus_per_node > 0) args.push_back("--gres=gpu:" + std::to_string(slurm.gpus_per_node));
  if (!slurm.time.empty()) args.push_back("--time=" + slurm.time);
  if (!slurm.partition.empty()) args.push_back("--partition=" + slurm.partition);
  if (!slurm.account.empty()) args.push_back("--account=" + slurm.account);
  for (const auto& option : slurm.extra) args.push_back(option);
  return args;
}

std::string slurm_batch_script(const fs::path& agent_binary, const fs::path& parts_home,
                               const fs::path& train_binary) {
  return "#!/bin/sh\n"
         "# Written by flotilla-agent: one run supervisor on each allocated node.\n"
         "exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 " +
         shell_quoted(agent_binary.string()) + " supervise --slurm-part --home " +
         shell_quoted(parts_home.string()) + " --train-binary " +
         shell_quoted(train_binary.string()) + "\n";
}

std::map<std::string, std::string> parse_scontrol_job(const std::string& line) {
  // Fields are Key=Value separated by spaces; a value has no space, except
  // for the few that run to the end of a line (Command=, WorkDir=...) which
  // are not read here: a token without '=' belongs to the value before it.
  std::map<std::string, std::string> fields;
  std::istringstream in(line);
  std::string last;
  for (std::string token; in >> token;) {
    const auto eq = token.find('=');
    if (eq == std::string::npos || eq == 0) {
      if (!last.empty()) fields[last] += " " + token;
      continue;
    }
    last = token.substr(0, eq);
    fields[last] = token.substr(eq + 1);
  }
  return fields;
}

bool slurm_job_ended(const std::string& state) {
  static const std::vector<std::string> ended = {
      "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE",      "FAILED",
      "NODE_FAIL", "PREEMPTED", "TIMEOUT",   "OUT_OF_MEMORY", "SPECIAL_EXIT"};
  return std::find(ended.begin(), ended.end(), state) != ended.end();
}

int slurm_master_port(const std::string& job_id, int64_t restarts) {
  int64_t id = 0;
  for (char c : job_id)
    if (std::isdigit(static_cast<unsigned char>(c))) id = (id * 10 + (c - '0')) % 1000000007;
  return 20000 + static_cast<int>((id * 7 + std::max<int64_t>(restarts, 0)) % 20000);
}

std::optional<RunOutcome> slurm_job_outcome(const std::string& job_id,
                                            const std::map<std::string, std::string>& job,
                                            const std::vector<std::string>& lost_nodes) {
  const std::string state = field(job, "JobState");
  const std::string reason = field(job, "Reason");
  const std::string why = reason.empty() || reason == "None" ? "" : " (" + reason + ")";
  const std::string job_words = "SLURM job " + job_id;
  if (state == "CANCELLED")
    return RunOutcome{"killed", job_words + " was cancelled outside Flotilla (scancel)" + why};
  if (state == "TIMEOUT")
    return RunOutcome{
        "failed",
        job_words + " reached its time limit" +
            (field(job, "TimeLimit").empty() ? std::string() : " of " + field(job, "TimeLimit")) +
            " and SLURM ended it"};
  if (state == "NODE_FAIL") {
    std::string names;
    for (const auto& n : lost_nodes) names += (names.empty() ? "" : ", ") + n;
    return RunOutcome{"failed",
                      (names.empty() ? std::string("a node")
                                     : (lost_nodes.size() == 1 ? "node " : "nodes ") + names) +
                          " of " + job_words + (lost_nodes.size() > 1 ? " were" : " was") +
                          " lost (SLURM: NODE_FAIL" + (why.empty() ? "" : ", " + reason) + ")"};
  }
  if (state == "OUT_OF_MEMORY")
    return RunOutcome{"oom", job_words + " ran out of memory (SLURM: OUT_OF_MEMORY)"};
  if (state == "PREEMPTED" || state == "BOOT_FAIL" || state == "DEADLINE")
    return RunOutcome{"failed", job_words + " was ended by SLURM: " + state + why};
  return std::nullopt;  // COMPLETED, FAILED: the parts say
}

int run_slurm_job(const SlurmJobOptions& options) {
  const sigset_t set = SlurmJob::signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  try {
    return SlurmJob(options).run();
  } catch (const std::exception& e) {
    std::cerr << "flotilla-agent slurm-job " << options.run << ": " << e.what() << "\n";
    try {
      RunDirectory dir(options.home, options.run);
      std::string message = e.what();
      if (const auto cancelled = cancel_slurm_job(dir.path()); !cancelled.empty())
        message += "; " + cancelled;
      dir.write_final(
          {"failed", message, append_run_end(dir.spool(), options.run, "failed", message)});
    } catch (...) {
    }
    return 1;
  }
}

}  // namespace flotilla::agent
