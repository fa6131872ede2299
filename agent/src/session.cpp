#include "session.h"

#include "node_probe.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/line_buffer.h"
#include "flotilla/protocol/numbers.h"
#include "processes.h"
#include "run_directory.h"
#include "slurm_job.h"
#include "spool.h"

namespace flotilla::agent {

Session::Session(SessionOptions options, int in_fd, int out_fd)
    : options_(std::move(options)), in_fd_(in_fd), out_fd_(out_fd) {}

Session::~Session() {
  closing_ = true;
  for (auto& [run, follower] : followers_)
    if (follower.thread.joinable()) follower.thread.join();
}

int Session::serve() {
  protocol::LineBuffer lines;
  char buffer[1 << 16];
  while (!done_) {
    const ssize_t n = ::read(in_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    lines.feed(
        {buffer, static_cast<size_t>(n)}, [&](std::string_view line) { handle_line(line); },
        [&](size_t bytes) {
          ++line_number_;
          report_malformed("line of " + std::to_string(bytes) + " bytes is longer than the " +
                           std::to_string(protocol::kMaxLineBytes) + " allowed");
        });
  }
  if (auto rest = lines.take_rest(); !rest.empty() && !done_) handle_line(rest);
  return exit_code_;
}

namespace {
template <typename M>
auto run_of_message(const M& m, int) -> decltype(std::string(m.run)) {
  return m.run;
}
template <typename M>
std::string run_of_message(const M&, long) {
  return {};
}
std::string run_of(const protocol::Message& message) {
  return std::visit([](const auto& m) { return run_of_message(m, 0); }, message);
}
}  // namespace

void Session::report_malformed(const std::string& reason) {
  ++malformed_;
  send(protocol::Error{"malformed line " + std::to_string(line_number_) + " (" +
                           std::to_string(malformed_.load()) + " so far): " + reason,
                       /*run=*/{}});
}

void Session::handle_line(std::string_view line) {
  ++line_number_;
  if (line.empty()) return;
  protocol::Message message;
  try {
    message = protocol::decode(line);
  } catch (const protocol::DecodeError& e) {
    report_malformed(e.what());
    return;
  }
  try {
    handle(message);
  } catch (const std::exception& e) {
    send(protocol::Error{std::string(protocol::type_of(message)) + ": " + e.what(),
                         run_of(message)});
  }
}

void Session::handle(const protocol::Message& message) {
  if (const auto* hello = std::get_if<protocol::Hello>(&message)) {
    if (hello->version != protocol::kVersion) {
      send(protocol::Error{"protocol version " + std::to_string(hello->version) +
                               " is not supported: this agent speaks version " +
                               std::to_string(protocol::kVersion),
                           /*run=*/{}});
      done_ = true;
      exit_code_ = 2;
      return;
    }
    greeted_ = true;
    send(protocol::Hello{"agent",
                         options_.software,
                         {"start", "stop", "status", "resume", "system-metrics", "probe",
                          protocol::kAllreduceBenchCapability, protocol::kResumeRunCapability,
                          protocol::kBlockProfileCapability}});
    return;
  }
  if (!greeted_) {
    send(protocol::Error{
        "expected a hello first, got \"" + std::string(protocol::type_of(message)) + "\"",
        /*run=*/{}});
    return;
  }
  if (const auto* m = std::get_if<protocol::StartRun>(&message)) return start(*m);
  if (const auto* m = std::get_if<protocol::StopRun>(&message)) return stop(*m);
  if (const auto* m = std::get_if<protocol::StatusRequest>(&message)) return status(*m);
  if (const auto* probe = std::get_if<protocol::Probe>(&message))
    return send(probe_node(options_.home, probe->slurm));
  if (const auto* m = std::get_if<protocol::Resume>(&message)) {
    RunDirectory dir(options_.home, m->run);
    if (!RunDirectory::valid_run_name(m->run) || !dir.exists())
      throw std::runtime_error("no run \"" + m->run + "\" on this node");
    return follow(m->run, m->after_seq);
  }
  send(protocol::Error{"\"" + std::string(protocol::type_of(message)) + "\" is not a request",
                       /*run=*/{}});
}

void Session::start(const protocol::StartRun& start) {
  if (!RunDirectory::valid_run_name(start.run))
    throw std::runtime_error("run name \"" + start.run +
                             "\" may hold only letters, digits, '-', '_' and '.'");
  RunDirectory dir(options_.home, start.run);
  // A new attempt goes on in the ended run's directory, its spool numbered on
  // from the last line; the follower sends what comes after it.
  int64_t streamed_before = 0;
  if (start.resume) {
    if (!dir.exists())
      throw std::runtime_error("no run \"" + start.run + "\" on this node to resume");
    if (dir.supervisor_running() || !dir.final_state())
      throw std::runtime_error("run \"" + start.run +
                               "\" has not ended on this node: nothing to resume");
    if (const auto left = processes_in_groups(dir.process_groups().groups); !left.empty())
      throw std::runtime_error("run \"" + start.run + "\" cannot be resumed on this node: " +
                               survivors_words(left) + " of its last attempt still run");
    SpoolReader spool(dir.spool());
    spool.poll([&](std::string_view line) {
      if (auto seq = seq_of(line)) streamed_before = std::max(streamed_before, *seq);
    });
    dir.set_aside_final();
  } else if (dir.exists()) {
    throw std::runtime_error("run \"" + start.run + "\" already exists on this node");
  }
  if (start.ranks.empty()) throw std::runtime_error("no ranks to start");
  std::vector<std::string> unread;  // the ranks report a config they cannot read
  const auto config = read_experiment(start.config_json, "start", unread);
  if (start.mode != protocol::RunMode::allreduce_bench) {
    // The data is checked here, where the ranks read it, before any starts:
    // a node without it (or with a damaged copy) ends the run at once with
    // the files named, rather than after its peers have begun. (On a SLURM
    // login node too: the job's nodes read what the cluster shares.)
    if (auto problems = data_file_problems(config); !problems.empty()) {
      std::string text;
      for (const auto& p : problems) text += (text.empty() ? "" : "; ") + p;
      throw std::runtime_error("the data set cannot be read on this node, no rank was started: " +
                               text);
    }
  }
  dir.write_start(start);
  // A SLURM run's ranks start on the job's nodes, once SLURM gives it them:
  // here a job supervisor submits it and follows it.
  const bool slurm = config.slurm.enabled();
  spawn_detached({own_executable().string(), slurm ? "slurm-job" : "supervise", "--home",
                  options_.home.string(), "--run", start.run, "--train-binary",
                  options_.train_binary.string()},
                 dir.path() / "supervisor.log");
  // The supervisor writes its process groups once every rank has started
  // (a job supervisor, itself, before it submits).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<ProcessGroupRecord> groups;
  const auto waiting = [&] {
    if (slurm) return !dir.supervisor().running;
    return (groups = dir.process_groups().groups).size() < start.ranks.size();
  };
  while (waiting() && !dir.final_state() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  protocol::Started started{start.run, {}};
  for (const auto& group : groups) started.pids.push_back(group.leader.pid);
  send(started);
  follow(start.run, streamed_before);
}

void Session::stop(const protocol::StopRun& stop) {
  RunDirectory dir(options_.home, stop.run);
  if (!RunDirectory::valid_run_name(stop.run) || !dir.exists())
    throw std::runtime_error("no run \"" + stop.run + "\" on this node");
  bool signalled = false;
  if (const auto supervisor = dir.supervisor().running) {
    write_file_atomically(dir.path() / "stop_grace_s", format_number(stop.grace_s));
    write_file_atomically(dir.path() / "stop_why", stop.why);  // empty: on request
    signalled = signal_process(*supervisor, SIGTERM);
  }
  if (!signalled && !dir.final_state()) {
    // A stop sent because another node failed can reach this node before
    // its follower notices the dead supervisor: that death is this node's
    // failure (often the cause of the other's), not a stop on request.
    end_orphaned_run(stop.run, stop.why.empty() ? "killed" : "failed");
  }
  if (!followers_.count(stop.run)) follow(stop.run, kOnlyTheEnd);  // the run_end still comes
}

void Session::end_orphaned_run(const std::string& run, const std::string& outcome_if_clean) {
  RunDirectory dir(options_.home, run);
  // What the files name but is not the run's (or cannot be told to be) is
  // said in the run's end and left alone.
  const auto supervisor = dir.supervisor();
  const auto recorded = dir.process_groups();
  auto strangers = recorded.strangers();
  if (!supervisor.stranger.empty()) strangers.insert(strangers.begin(), supervisor.stranger);
  const auto left = kill_groups(recorded.groups);
  // Ranks die with their supervisor (PR_SET_PDEATHSIG); these are what is left.
  std::string message = outcome_if_clean == "failed"
                            ? "the run's supervisor died without ending it; its ranks were stopped"
                            : "the run's supervisor had died; no process of the run is left";
  std::string outcome = outcome_if_clean;
  if (supervisor.unverifiable || !recorded.unverifiable.empty()) {
    outcome = "failed";
    message = "the run is ended here, but whether a process of it still runs cannot be told";
  }
  if (!left.empty()) {
    outcome = "failed";
    message += ", but " + survivors_words(left);
  }
  for (const auto& words : strangers) message += "; " + words;
  // A SLURM run's ranks are the job's: it goes with its supervisor.
  if (const auto cancelled = cancel_slurm_job(dir.path()); !cancelled.empty())
    message += "; " + cancelled;
  dir.write_final({outcome, message, append_run_end(dir.spool(), run, outcome, message)});
}

void Session::status(const protocol::StatusRequest& request) {
  RunDirectory dir(options_.home, request.run);
  if (!RunDirectory::valid_run_name(request.run) || !dir.exists())
    throw std::runtime_error("no run \"" + request.run + "\" on this node");
  protocol::StatusReply reply{request.run, "running", 0, {}};
  if (auto final = dir.final_state()) {
    reply.state = final->outcome;
    reply.last_seq = final->last_seq;
  } else {
    SpoolReader reader(dir.spool());
    reader.poll(
        [&](std::string_view line) { reply.last_seq = seq_of(line).value_or(reply.last_seq); });
    if (!dir.supervisor_running()) reply.state = "lost";
  }
  for (pid_t pid : processes_in_groups(dir.process_groups().groups)) reply.live_pids.push_back(pid);
  send(reply);
}

void Session::follow(const std::string& run, int64_t after_seq) {
  if (auto it = followers_.find(run); it != followers_.end()) {
    *it->second.cancelled = true;
    if (it->second.thread.joinable()) it->second.thread.join();
    followers_.erase(it);
  }
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  followers_[run].cancelled = cancelled;
  followers_[run].thread = std::thread([this, run, after_seq, cancelled] {
    RunDirectory dir(options_.home, run);
    SpoolReader reader(dir.spool());
    bool ended = false;
    // A resumed run's spool holds the run_end of each earlier attempt: those
    // neither end the stream nor go out (the controller would end the run).
    const int64_t superseded_ends = dir.earlier_attempts_end_seq();
    auto next_check = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!ended && !closing_ && !*cancelled) {
      reader.poll([&](std::string_view line) {
        const auto seq = seq_of(line).value_or(0);
        if (line.find("\"type\":\"run_end\"") != std::string_view::npos) {
          if (seq <= superseded_ends) return;
          ended = true;
        }
        // The run_end goes out even when the controller has it stored: a
        // second controller (a `flotilla kill` beside the `flotilla run`)
        // resumes from what the first one stored and still needs to hear
        // that this node's run is over.
        if (seq > after_seq || ended) send_line(std::string(line));
      });
      if (ended) break;
      // A supervisor that died without ending its run (killed, or its node's
      // OOM killer) ends it here, and its ranks with it, so that nothing
      // trains on without anyone to report it and the peers fail fast.
      if (std::chrono::steady_clock::now() >= next_check) {
        next_check += std::chrono::seconds(1);
        try {
          if (!dir.supervisor_running() && !dir.final_state()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a clean end in flight
            if (!dir.final_state()) end_orphaned_run(run, "failed");
            continue;
          }
        } catch (const std::exception& e) {
          // Its end cannot be spooled (a full disk): said here, the only
          // way left, and the session serves on.
          send(protocol::Error{"run " + run + " ended without its end in the spool: " + e.what(),
                               run});
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

void Session::send(const protocol::Message& message) {
  send_line(protocol::encode(message));
}

void Session::send_line(const std::string& line) {
  std::lock_guard lock(out_mutex_);
  std::string data = line + "\n";
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(out_fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the controller went away; the run goes on
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace flotilla::agent
