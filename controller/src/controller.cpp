#include "flotilla/controller/controller.h"

#include <QDateTime>
#include <QRandomGenerator>
#include <QThreadPool>
#include <iterator>
#include <nlohmann/json.hpp>

#include "agent_link.h"
#include "event_loop.h"
#include "flotilla/controller/link_bench.h"
#include "flotilla/controller/nodes.h"
#include "flotilla/controller/paths.h"
#include "node_connection.h"

namespace flotilla::controller {

namespace {
// The grace of the stops a failure sends to the other nodes.
constexpr double kStopGraceS = 5.0;
// The pool's bound: connects and stops waiting on the network at once.
constexpr int kBackgroundThreads = 32;
}  // namespace

std::string Controller::new_run_id() {
  return QDateTime::currentDateTimeUtc().toString("yyyyMMdd-HHmmss").toStdString() + "-" +
         QString::number(QRandomGenerator::global()->bounded(0x10000), 16)
             .rightJustified(4, '0')
             .toStdString();
}

Controller::Controller(Store& store, ControllerOptions options)
    : store_(store),
      options_(std::move(options)),
      background_(std::make_unique<QThreadPool>()),
      loop_(std::make_unique<EventLoop>(
          [this](const std::string& what) { note_problem("controller: " + what); })) {
  if (options_.agent_binary.empty()) options_.agent_binary = sibling_program("flotilla-agent");
  // Connecting and stopping nodes wait on the network: many at once (a
  // failed run's nodes are all stopped together), never unbounded.
  background_->setMaxThreadCount(kBackgroundThreads);
  // Records the database refuses wait in the store's queue; whoever follows
  // the runs hears of it (the CLI prints a line, the window its status).
  store_listener_ = store_.add_problem_listener(
      [this](const StoreProblem& problem) { note_problem(problem.message); });
  // Records the store let go of past its queue's limit while the database
  // refused writes: the agent sends them again from its spool, as for an
  // attach. Posted: the writer thread must not wait for the loop or a link.
  refetch_listener_ = store_.add_refetch_listener([this](const RefetchRequest& r) {
    loop_->post([this, r] {
      // Another controller on this store (a sweep's, a kill's) follows it.
      if (!followed_.count(r.run)) return;
      in_background([this, r] {
        try {
          if (!link_for(r.node)->send(protocol::Resume{r.run, r.after_seq}))
            throw std::runtime_error("the agent went away");
        } catch (const std::exception& e) {
          note_problem("run " + r.run + ": node " + r.node + " could not be asked again for the " +
                       "records after #" + std::to_string(r.after_seq) + " (" + e.what() +
                       "); they stay in its spool, and a reconnect or `flotilla attach` fetches "
                       "them");
        }
      });
    });
  });
  loop_->post([this] { check_stalls(); });  // and every second after
}

ConnectOptions Controller::connect_options() const {
  auto options = options_.connect;
  if (options.agent_binary.empty()) options.agent_binary = options_.agent_binary;
  return options;
}

void Controller::keep_checked_connection(const std::string& node,
                                         std::unique_ptr<NodeConnection> connection) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(links_mutex_);
  // One no link came for in time (a start the person did not make) is closed.
  for (auto it = checked_connections_.begin(); it != checked_connections_.end();)
    it = now - it->second.opened > kCheckedConnectionKept ? checked_connections_.erase(it)
                                                          : std::next(it);
  checked_connections_[node] = {std::move(connection), now};
}

std::shared_ptr<NodeConnection> Controller::take_checked_connection(const std::string& node) {
  std::lock_guard lock(links_mutex_);
  const auto it = checked_connections_.find(node);
  if (it == checked_connections_.end()) return nullptr;
  auto kept = std::move(it->second);
  checked_connections_.erase(it);
  if (std::chrono::steady_clock::now() - kept.opened > kCheckedConnectionKept) return nullptr;
  return kept.connection;
}

std::unique_ptr<Transport> Controller::open_transport(const std::string& node) {
  const auto row = store_.node(node);
  if (!row) throw std::runtime_error("no node \"" + node + "\" in " + store_.path().toStdString());
  std::shared_ptr<NodeConnection> connection;
  std::unique_ptr<Transport> transport;
  // The connection the host-key check just made, where there is one; if the
  // node has dropped it meanwhile, a new one.
  if (auto checked = take_checked_connection(node)) {
    try {
      transport = checked->start_agent();
      connection = std::move(checked);
    } catch (const std::exception&) {  // dropped by the node: a new one below
    }
  }
  if (!transport) {
    connection = NodeConnection::open(*row, connect_options());
    transport = connection->start_agent();
  }
  {
    std::lock_guard lock(links_mutex_);
    addresses_[node] = connection->address();
  }
  if (const auto& replaced = connection->last_deploy().replaced; !replaced.empty())
    note_problem("node " + node + ": " + replaced);
  return transport;
}

protocol::ProbeReply Controller::probe(const std::string& node) {
  refuse_on_loop("probe");
  auto answer = std::make_shared<std::promise<protocol::ProbeReply>>();
  auto future = answer->get_future();
  // Registered before the probe goes out: the answer is handled on the loop.
  loop_->call([&] { probes_[node] = answer; });
  if (!link_for(node)->send(protocol::Probe{}))
    throw std::runtime_error("node " + node + ": the agent went away before the probe");
  if (future.wait_for(options_.hello_timeout) != std::future_status::ready)
    throw std::runtime_error("node " + node + ": no answer to a probe");
  return future.get();
}

Controller::~Controller() {
  store_.remove_problem_listener(store_listener_);
  store_.remove_refetch_listener(refetch_listener_);
  {
    std::lock_guard lock(background_mutex_);
    closing_ = true;
  }
  // Work started before (stops a failure queued) is done; the loop still
  // runs for it. Retries are the loop's timers and end with it.
  background_->waitForDone();
  std::map<std::string, std::shared_ptr<AgentLink>> links;
  std::vector<std::shared_ptr<AgentLink>> closed;
  {
    std::lock_guard lock(links_mutex_);
    links.swap(links_);
    closed.swap(closed_links_);
  }
  // Closed here, outside the lock, while the loop still takes what their
  // readers post (a reader waiting for room there is let go).
  links.clear();
  closed.clear();
  loop_->stop();
}

void Controller::refuse_on_loop(const char* call) const {
  if (loop_->on_loop_thread())
    throw std::logic_error(std::string("Controller::") + call +
                           " was called from an observer, on the controller's loop thread, "
                           "and would wait for that thread; call it from another");
}

void Controller::in_background(std::function<void()> work) {
  std::lock_guard lock(background_mutex_);
  if (closing_) return;
  background_->start(std::move(work));
}

std::shared_ptr<AgentLink> Controller::open_link(const std::string& node) const {
  std::lock_guard lock(links_mutex_);
  const auto it = links_.find(node);
  return it != links_.end() && it->second->open() ? it->second : nullptr;
}

std::shared_ptr<AgentLink> Controller::link_for(const std::string& node) {
  refuse_on_loop("link_for");  // it may connect: seconds in which no run is heard
  std::unique_lock lock(links_mutex_);
  // Closed links whose reader has returned are dropped (outside the lock:
  // closing a local agent's transport waits for its process).
  std::vector<std::shared_ptr<AgentLink>> finished;
  for (auto it = closed_links_.begin(); it != closed_links_.end();)
    if ((*it)->finished()) {
      finished.push_back(std::move(*it));
      it = closed_links_.erase(it);
    } else {
      ++it;
    }
  if (auto it = links_.find(node); it != links_.end()) {
    if (it->second->open()) {
      auto link = it->second;
      lock.unlock();
      finished.clear();
      return link;
    }
    closed_links_.push_back(std::move(it->second));
    links_.erase(it);
  }
  lock.unlock();
  finished.clear();
  // Opening may take seconds (starting a process, an SSH handshake): never
  // on the loop, which would hold every run's messages meanwhile.
  auto transport = open_transport(node);
  LinkEvents events;
  // The reader only decodes; what a message means is decided on the loop.
  events.on_messages = [this, node](std::vector<protocol::Message>&& read) {
    const size_t count = read.size();
    loop_->post_from_link(
        [this, node, read = std::move(read)] {
          for (const auto& m : read) handle(node, m);
        },
        count);
  };
  events.on_problem = [this](const std::string& message) { note_problem(message); };
  events.on_closed = [this, node] {
    if (closing_) return;
    const int64_t closed_ms = now_ms();
    loop_->post([this, node, closed_ms] { link_closed(node, closed_ms); });
  };
  // It answered: no longer unreachable (before the link can say it closed).
  loop_->post([this, node] { unreachable_since_ms_.erase(node); });
  auto link = std::make_shared<AgentLink>(node, std::move(transport), std::move(events),
                                          options_.hello_timeout);
  lock.lock();
  auto& slot = links_[node];
  if (slot) closed_links_.push_back(std::move(slot));  // another thread opened one meanwhile
  slot = link;
  return link;
}

bool Controller::kill_run(const std::string& run, double grace_s) {
  refuse_on_loop("kill_run");
  const auto row = store_.run(run);
  if (!row) throw std::runtime_error("no run \"" + run + "\" in " + store_.path().toStdString());
  if (is_terminal(row->state)) return false;
  if (row->state == RunState::created) {
    loop_->call([&] { end_run(run, RunState::killed, "killed before it started"); });
    return true;
  }
  loop_->call([&] {
    followed_.insert(run);
    killing_.insert(run);
  });
  // Nodes in parallel: an unreachable one costs its connect timeout once, not per node.
  std::vector<std::future<void>> stopping;
  for (const auto& node : row->nodes)
    stopping.push_back(std::async(std::launch::async, [this, run, node, grace_s] {
      try {
        send_stop(run, node, grace_s);
      } catch (const std::exception& e) {
        note_problem("kill " + run + ": node " + node + " is unreachable (" + e.what() +
                     "); the kill is retried until it can be delivered");
        retry_stop_later(run, node, grace_s, {});
      }
    }));
  for (auto& s : stopping) s.get();
  return true;
}

std::vector<Controller::UnknownHostKey> Controller::unknown_host_keys(
    const std::vector<std::string>& nodes) {
  std::vector<NodeRow> to_check;
  for (const auto& name : nodes) {
    const auto node = store_.node(name);
    if (!node)
      throw std::runtime_error("no node \"" + name + "\" in " + store_.path().toStdString());
    if (node->is_local()) continue;
    if (open_link(name)) continue;  // a live link's key was checked when it connected
    to_check.push_back(*node);
  }
  // All at once: a handshake costs round trips and key exchange, and an
  // unreachable node its timeout; N nodes then cost about one node's time.
  std::vector<std::future<std::optional<UnknownHostKey>>> checks;
  for (const auto& node : to_check)
    checks.push_back(
        std::async(std::launch::async, [this, node]() -> std::optional<UnknownHostKey> {
          auto options = connect_options();
          options.trust_new_host_key = false;
          try {
            keep_checked_connection(node.name, NodeConnection::open(node, options));
            return std::nullopt;
          } catch (const HostKeyError& e) {
            if (e.kind() != HostKeyError::Kind::unknown) throw;
            return UnknownHostKey{node.name, e.fingerprint()};
          }
        }));
  std::vector<UnknownHostKey> unknown;
  std::exception_ptr first_problem;
  for (auto& check : checks) {
    try {
      if (auto key = check.get()) unknown.push_back(*key);
    } catch (...) {  // every check is waited for before the first problem is thrown
      if (!first_problem) first_problem = std::current_exception();
    }
  }
  if (first_problem) std::rethrow_exception(first_problem);
  return unknown;
}

void Controller::trust_host_key(const std::string& name, const std::string& confirmed_fingerprint) {
  const auto node = store_.node(name);
  if (!node) throw std::runtime_error("no node \"" + name + "\" in " + store_.path().toStdString());
  if (confirmed_fingerprint.empty())
    throw std::runtime_error("node " + name +
                             ": no fingerprint to trust; a host key is trusted only as the "
                             "fingerprint a person confirmed (\"SHA256:...\")");
  // This is a new connection, and the node may present another key on it
  // than the one shown: only the confirmed one is recorded.
  auto options = connect_options();
  options.trust_new_host_key = false;
  options.confirmed_host_keys = {{name, confirmed_fingerprint}};
  keep_checked_connection(name, NodeConnection::open(*node, options));
}

void Controller::send_stop(const std::string& run, const std::string& node, double grace_s,
                           const std::string& why) {
  const bool unreachable = loop_->call([&] { return unreachable_since_ms_.count(node) > 0; });
  if (unreachable && !node_answers(node))
    throw std::runtime_error("unreachable: its SSH port does not answer");
  const auto link = link_for(node);
  // The end, and every record before it, must reach this controller.
  if (!link->send(protocol::Resume{run, store_.last_seq(run, node)}) ||
      !link->send(protocol::StopRun{run, grace_s, why}))
    throw std::runtime_error("the agent went away");
}

void Controller::deliver_stop(const std::string& run, const std::string& node, double grace_s,
                              const std::string& why, std::string first_failure) {
  in_background([this, run, node, grace_s, why, first_failure = std::move(first_failure)] {
    try {
      send_stop(run, node, grace_s, why);
    } catch (const std::exception& e) {
      note_problem(first_failure + " (" + e.what() +
                   "); the stop is retried until it can be delivered");
      retry_stop_later(run, node, grace_s, why);
    }
  });
}

void Controller::retry_stop_later(const std::string& run, const std::string& node, double grace_s,
                                  const std::string& why) {
  loop_->post_after(options_.retry_interval, [this, run, node, grace_s, why] {
    {
      std::lock_guard lock(ended_mutex_);
      if (ended_.count(run)) return;
    }
    in_background([this, run, node, grace_s, why] {
      try {
        send_stop(run, node, grace_s, why);
        note_problem("kill " + run + ": node " + node + " is reachable again; the kill was sent");
      } catch (const std::exception&) {
        retry_stop_later(run, node, grace_s, why);
      }
    });
  });
}

void Controller::attach(const std::string& run) {
  refuse_on_loop("attach");
  const auto row = store_.run(run);
  if (!row) throw std::runtime_error("no run \"" + run + "\" in " + store_.path().toStdString());
  if (is_terminal(row->state)) return;
  const bool followed_already = loop_->call([&] {
    // Followed already, unless a link it came through has closed since.
    bool all_open = followed_.count(run) > 0;
    for (const auto& node : row->nodes) all_open = all_open && open_link(node);
    followed_.insert(run);
    return all_open;
  });
  if (followed_already) return;
  for (const auto& node : row->nodes) {
    try {
      link_for(node)->send(protocol::Resume{run, store_.last_seq(run, node)});
      loop_->post([this, run, node] { heard_from(run, node); });  // the stall clock starts now
    } catch (const std::exception& e) {
      note_problem("attach " + run + ": " + e.what());
    }
  }
}

std::vector<std::string> Controller::attach_live_runs() {
  std::vector<std::string> runs;
  for (const auto& row : store_.live_runs()) {
    if (row.state == RunState::created) {
      // It never reached an agent: nothing of it can be running.
      loop_->call([&] {
        end_run(row.id, RunState::failed, "the controller stopped before the run was started");
      });
      continue;
    }
    attach(row.id);
    runs.push_back(row.id);
  }
  return runs;
}

bool Controller::wait_for_end(const std::string& run, std::chrono::milliseconds timeout) {
  refuse_on_loop("wait_for_end");
  std::unique_lock lock(ended_mutex_);
  const bool ended = ended_changed_.wait_for(lock, timeout, [&] { return ended_.count(run) > 0; });
  if (ended) return true;
  lock.unlock();
  const auto row = store_.run(run);
  return row && is_terminal(row->state);
}

void Controller::note_problem(const std::string& message) {
  if (auto* observer = observer_.load()) observer->problem(message);
}

bool Controller::move_run(const std::string& run, RunState state, const std::string& reason) {
  const bool moved = store_.transition(run, state, reason);
  if (auto* observer = observer_.load(); moved && observer)
    observer->state_changed(run, state, reason);
  return moved;
}

void Controller::end_run(const std::string& run, RunState state, const std::string& reason) {
  // The transition is committed behind every record queued before it, so
  // once it returns the store holds the run's records up to its end. The
  // observer hears of the end before waiters wake, so that a printed end
  // comes before whatever the waiter prints next.
  move_run(run, state, reason);
  followed_.erase(run);
  {
    std::lock_guard lock(ended_mutex_);
    ended_.insert(run);
  }
  ended_changed_.notify_all();
}

void Controller::stop_after_failure(const std::string& run, const std::string& failed_node,
                                    const std::vector<std::string>& all_nodes) {
  if (killing_.count(run) || !failing_.insert(run).second) return;  // stopping already
  // Before the run's starts went out, no node holds ranks: none is stopped,
  // and the start sends none to a failing run.
  std::vector<std::string> nodes;
  const auto sent = starts_sent_.find(run);
  for (const auto& node : all_nodes)
    if (sent == starts_sent_.end() || sent->second.count(node)) nodes.push_back(node);
  for (const auto& node : nodes)
    deliver_stop(run, node, kStopGraceS, "stopped because " + failed_node + " failed",
                 "run " + run + ": node " + node + " could not be told to stop its ranks");
}

void Controller::node_ended(const std::string& node, const protocol::RunEnd& end) {
  const auto row = store_.run(end.run);
  if (!row) return;
  const auto nodes = row->nodes;
  auto& seen = node_ends_[end.run];
  seen[node] = end;
  if (seen.size() < nodes.size()) {
    const auto outcome = run_state_from_name(end.outcome);
    const bool failed = outcome != RunState::finished && outcome != RunState::killed;
    // The first node to fail: the others' ranks would wait for it in a
    // collective or the rendezvous; they are stopped now.
    if (failed && !killing_.count(end.run)) {
      std::vector<std::string> others;
      for (const auto& n : nodes)
        if (!seen.count(n)) others.push_back(n);
      stop_after_failure(end.run, "node " + node, others);
    }
    // A node stopped after another failed: the rest may be unreachable.
    end_if_only_unreachable_nodes_left(end.run);
    return;
  }
  const auto ends = std::move(seen);
  node_ends_.erase(end.run);
  // Every node has ended the run: the worst outcome is the run's, with the
  // words of every node that ended it so (the cause is often on one node and
  // its peers only saw it go).
  auto rank_of = [](RunState s) {
    switch (s) {
      case RunState::failed:
        return 3;
      case RunState::oom:
        return 2;
      case RunState::killed:
        return 1;
      default:
        return 0;
    }
  };
  auto outcome_of = [](const protocol::RunEnd& e) {
    const auto parsed = run_state_from_name(e.outcome);
    return parsed && is_terminal(*parsed) ? *parsed : RunState::failed;
  };
  auto words_of = [](const protocol::RunEnd& e) {
    const auto parsed = run_state_from_name(e.outcome);
    return parsed && is_terminal(*parsed)
               ? e.message
               : "the agent reported an unknown outcome \"" + e.outcome + "\": " + e.message;
  };
  RunState state = RunState::finished;
  for (const auto& [name, e] : ends)
    if (rank_of(outcome_of(e)) > rank_of(state)) state = outcome_of(e);
  bool killing = killing_.erase(end.run) > 0;
  failing_.erase(end.run);
  // An agent reports `killed` only for a stop someone asked for, and the ranks
  // of other nodes that saw their peers go then fail: a requested kill ends
  // the run killed, whichever controller asked, whatever those ranks said.
  // The stops a controller sent after a node failed say so, and are not such
  // a kill.
  for (const auto& [name, e] : ends)
    killing =
        killing || (outcome_of(e) == RunState::killed && e.message == protocol::kStoppedOnRequest);
  if (killing && state != RunState::finished) state = RunState::killed;
  std::string reason;
  // The nodes a stop reached first end `killed`; the ranks elsewhere die in
  // their collectives of a socket error once their partners are gone. That
  // error is the stop seen from the other side, so the reason says so; each
  // node's own words stay in its run_end record.
  std::vector<std::string> stopped, left;
  for (const auto& [name, e] : ends)
    (outcome_of(e) == RunState::killed && e.message == protocol::kStoppedOnRequest ? stopped : left)
        .push_back(name);
  if (state == RunState::killed && nodes.size() > 1 && !stopped.empty()) {
    reason =
        (stopped.size() == 1 ? "node " : "nodes ") + join_list(stopped) + ": stopped on request";
    if (!left.empty())
      reason += (left.size() == 1 ? "; node " : "; nodes ") + join_list(left) +
                ": the ranks ended because their partner ranks on the stopped node" +
                (stopped.size() == 1 ? "" : "s") + " left";
  } else {
    for (const auto& [name, e] : ends) {
      if ((outcome_of(e) != state && !killing) || words_of(e).empty()) continue;
      if (!reason.empty()) reason += "; ";
      reason += (nodes.size() > 1 ? "node " + name + ": " : "") + words_of(e);
    }
  }
  end_run(end.run, state, reason);
}

bool Controller::is_slurm_run(const std::string& config_json) {
  const auto config = nlohmann::json::parse(config_json, nullptr, false);
  if (!config.is_object()) return false;
  const auto slurm = config.find("slurm");
  if (slurm == config.end() || !slurm->is_object()) return false;
  const auto nodes = slurm->find("nodes");
  return nodes != slurm->end() && nodes->is_number_integer() && nodes->get<int64_t>() > 0;
}

// The login node's job supervisor says the job's state as SLURM has it: a
// waiting job makes the run queued with SLURM's reason, a job on its nodes
// makes it running. Ends come as the run's end, not from here.
void Controller::slurm_job_said(const std::string& run, const std::string& record_json) {
  const auto body = nlohmann::json::parse(record_json, nullptr, false);
  if (!body.is_object()) return;
  const std::string job = body.value("job", std::string());
  const std::string state = body.value("state", std::string());
  const std::string reason = body.value("reason", std::string());
  // Requeued (a node lost, preempted): its parts go on from the newest checkpoint.
  const std::string restarts = body.value("restarts", std::string("0"));
  const std::string after = body.value("requeued_after", std::string());
  const std::string requeued = restarts == "0" || restarts.empty()
                                   ? std::string()
                                   : " requeued" +
                                         (after.empty() ? std::string() : " after " + after) +
                                         " (restart " + restarts + ")";
  if (state == "PENDING") {
    const std::string words =
        "SLURM job " + job + requeued + " waits" + (reason.empty() ? std::string() : ": " + reason);
    const auto row = store_.run(run);
    if (row && row->state == RunState::queued && row->reason == words) return;
    move_run(run, RunState::queued, words);
  } else if (state == "RUNNING") {
    const std::string nodes = body.value("nodes", std::string());
    move_run(run, RunState::running,
             "SLURM job " + job + requeued + (nodes.empty() ? std::string() : " on " + nodes) +
                 (requeued.empty() ? std::string() : ", resuming from the newest checkpoint"));
  }
}

void Controller::handle(const std::string& node, const protocol::Message& message) {
  if (const auto* record = std::get_if<protocol::Record>(&message)) {
    RecordRow row{record->seq, record->node.empty() ? node : record->node, record->rank,
                  record->record_type.empty() ? "unknown" : record->record_type,
                  record->record_json};
    heard_from(record->run, node, record);
    // One let go of past the store's queue limit comes again from the spool.
    if (auto* observer = observer_.load(); store_.append_record(record->run, row) && observer)
      observer->record_received(record->run, row);
    if (row.type == "slurm_job") slurm_job_said(record->run, record->record_json);
    return;
  }
  if (const auto* end = std::get_if<protocol::RunEnd>(&message)) {
    RecordRow row{end->seq, node, -1, "run_end", protocol::encode(*end)};
    // Let go of past the store's queue limit: acted on when it comes again.
    if (!store_.append_record(end->run, row)) return;
    if (auto* observer = observer_.load()) observer->record_received(end->run, row);
    node_ended(node, *end);
    return;
  }
  if (const auto* probe = std::get_if<protocol::ProbeReply>(&message)) {
    if (auto it = probes_.find(node); it != probes_.end()) {
      it->second->set_value(*probe);
      probes_.erase(it);
    }
    return;
  }
  if (const auto* started = std::get_if<protocol::Started>(&message)) {
    heard_from(started->run, node);
    // A SLURM run runs once its job has nodes: its job's records say when.
    const auto row = store_.run(started->run);
    if (!row || !is_slurm_run(row->config_json)) move_run(started->run, RunState::running);
    return;
  }
  if (const auto* error = std::get_if<protocol::Error>(&message)) {
    if (!error->run.empty()) {
      const auto row = store_.run(error->run);
      if (row && !is_terminal(row->state)) {
        std::vector<std::string> others;
        for (const auto& n : row->nodes)
          if (n != node) others.push_back(n);
        // The stops are queued before the end is stored: the end wakes the
        // CLI, which then closes this controller, and a closing controller
        // starts no more background work (the stops were lost under load).
        stop_after_failure(error->run, "node " + node, others);
        end_run(error->run, RunState::failed, "node " + node + ": " + error->message);
        return;
      }
    }
    note_problem("node " + node + ": " + error->message);
    return;
  }
  note_problem("node " + node + ": unexpected \"" + std::string(protocol::type_of(message)) +
               "\" message");
}

}  // namespace flotilla::controller
