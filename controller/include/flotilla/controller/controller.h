#pragma once
// Starts, follows, stops and reattaches runs: the store on one side, one
// AgentLink per node on the other. Thread-safe; the run state machine lives
// on one loop thread, and observers are called there (problems may also
// come from the store's writer thread).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "flotilla/controller/connect_options.h"
#include "flotilla/controller/store.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/messages.h"

class QThreadPool;

namespace flotilla::controller {

class AgentLink;
class EventLoop;
class NodeConnection;
class Transport;

class ControllerObserver {
 public:
  virtual ~ControllerObserver() = default;
  // A record has been queued for the store (it is committed soon after).
  virtual void record_received(const std::string& /*run*/, const RecordRow& /*record*/) {}
  // A state is stored; for an end, every record before it is stored too.
  virtual void state_changed(const std::string& /*run*/, RunState /*state*/,
                             const std::string& /*reason*/) {}
  // Something that is not a run's state: a malformed line, a lost agent, a
  // database that refuses the records (said again when it takes them).
  virtual void problem(const std::string& /*message*/) {}
};

struct ControllerOptions {
  std::filesystem::path agent_binary;  // empty: flotilla-agent next to this program
  std::chrono::milliseconds hello_timeout{30000};
  ConnectOptions connect;  // SSH: known_hosts, trusting new host keys, timeouts
  // The pause between tries to reconnect to a node or to deliver a kill.
  std::chrono::milliseconds retry_interval{2000};
};

class Controller {
 public:
  explicit Controller(Store& store, ControllerOptions options = {});
  ~Controller();  // closes the links; runs go on and can be reattached
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Set before the first run; called on the controller's loop thread.
  void set_observer(ControllerObserver* observer) { observer_ = observer; }

  // Stores a run of `config` and starts it on the config's nodes; returns the
  // run id. Throws ConfigError for a config that cannot run (every problem
  // named); a node that cannot be reached makes the run `failed`, not a throw.
  // `run_id`, when given, is the id to use (a sweep claims its point with the
  // id before the run exists); otherwise a new one.
  std::string start_run(const ExperimentConfig& config,
                        std::optional<int64_t> experiment_id = std::nullopt,
                        const std::string& run_id = {});
  // Why the stored nodes cannot host `config` (besides validate()'s
  // problems): unknown nodes, "local" beside others, data missing on the
  // local node, more ranks a node than its last probe found GPUs (device
  // cuda). Empty when they can; start_run refuses with these.
  std::vector<std::string> hosting_problems(const ExperimentConfig& config) const;
  // A new run id: the UTC time and a random suffix, "20240102-030405-0a1b".
  static std::string new_run_id();
  // Starts `flotilla nodes bench`: a run over `nodes` whose ranks run the
  // engine's all-reduce size sweep instead of training, stored in
  // link_benches (link_bench.h); returns the run id. Throws ConfigError for
  // nodes that cannot host it (unknown, "local" beside others, fewer than
  // 2 ranks). A node whose agent predates the sweep fails the run, saying so.
  struct LinkBenchRequest {
    std::vector<std::string> nodes;
    int64_t ranks_per_node = 1;
    DeviceKind device = DeviceKind::cpu;
    protocol::BenchOptions sweep;  // 0s: the engine's defaults
  };
  std::string start_link_bench(const LinkBenchRequest& request);
  // Starts `flotilla nodes profile`: `config` (one node, the run's
  // micro-batch as its batch) timed on that node by flotilla-train
  // --profile-blocks; its `profile` record comes back as the run's
  // (node_profiles.h). Throws ConfigError as start_run does.
  std::string start_block_profile(const ExperimentConfig& config);
  // Asks every node of the run to stop it (SIGTERM, SIGKILL after grace_s);
  // the end, `killed` once no process is left, comes through the stream.
  // Returns false when the run had already ended. Throws for an unknown run.
  bool kill_run(const std::string& run, double grace_s = 5.0);
  // Starts a new attempt of a run that ended failed, killed or oom and saved
  // checkpoints (config save): its ranks go on from the newest checkpoint
  // every rank holds (flotilla-train --resume), in the same run directories,
  // their records stored on after the last attempt's. Throws ConfigError for
  // a run that cannot be resumed (no checkpoints, nodes gone), and
  // std::runtime_error for an unknown, live or finished run; a node that
  // cannot be reached makes the attempt `failed`, as a start does.
  void resume_run(const std::string& run);
  // Follows a live run again from the last record stored for each node.
  void attach(const std::string& run);
  std::vector<std::string> attach_live_runs();
  // Waits for the run's end to be stored; false after `timeout`.
  bool wait_for_end(const std::string& run, std::chrono::milliseconds timeout);

  // Host keys are settled before a run on remote nodes is stored or started:
  // connects to each remote node of `nodes` without a live link, all at
  // once, and returns those whose host key
  // this controller's known_hosts does not hold yet, with the key's SHA256
  // fingerprint for a person to compare. Throws HostKeyError for a key that
  // has changed (always refused) or differs from one confirmed in the
  // options (confirmed_host_keys), std::runtime_error for an unknown or
  // unreachable node.
  struct UnknownHostKey {
    std::string node;
    std::string fingerprint;
  };
  std::vector<UnknownHostKey> unknown_host_keys(const std::vector<std::string>& nodes);
  // Records `node`'s host key as trusted after a person confirmed
  // `confirmed_fingerprint` (as unknown_host_keys gave it): over a new
  // connection, so the key presented there must be that one, else
  // HostKeyError (not_confirmed, naming both) and nothing is recorded. A
  // changed key is still refused.
  void trust_host_key(const std::string& node, const std::string& confirmed_fingerprint);
  // The connections of both that found a trusted key are kept for the start
  // that follows: the node's next link is made over one instead of a second
  // handshake, if it comes within this time.
  static constexpr std::chrono::seconds kCheckedConnectionKept{120};

  // The node's answer to a probe over its link, connecting it first where
  // it has none (a free port for a rendezvous, what the node has).
  protocol::ProbeReply probe(const std::string& node);

 private:
  // How it is threaded (docs/architecture.md, "The controller's threads"):
  // one loop thread (event_loop.h) owns the run state machine below and
  // makes every store write of it; the links' reader threads only decode
  // lines and post the messages there; public calls post their state
  // changes there and wait; connecting, probing ports and delivering stops
  // run on a bounded pool and post their outcome back; retries and the
  // stall watchdog are the loop's timers, not threads that sleep.
  static bool is_slurm_run(const std::string& config_json);
  void slurm_job_said(const std::string& run, const std::string& record_json);
  // A SLURM run's config as sent to its login node: the partition and
  // account the node was added with, where the run names none.
  std::string with_login_defaults(const ExperimentConfig& config,
                                  const std::string& config_json) const;
  // Stores a run of `config` and starts its ranks in `mode`.
  std::string start(const ExperimentConfig& config, std::optional<int64_t> experiment_id,
                    protocol::RunMode mode, const protocol::BenchOptions& bench,
                    const std::string& run_id = {});
  // Sends the run's StartRun (a resume's, or a first start's) to every node
  // of `config`; a failure ends the run failed and stops nodes already started.
  void start_on_nodes(const std::string& run, const ExperimentConfig& config,
                      const std::string& config_json, protocol::RunMode mode,
                      const protocol::BenchOptions& bench, bool resume);
  // The node's open link, connecting it first (seconds: never on the loop).
  std::shared_ptr<AgentLink> link_for(const std::string& node);
  // The node's link if it is open, else null; connects nothing.
  std::shared_ptr<AgentLink> open_link(const std::string& node) const;
  std::unique_ptr<Transport> open_transport(const std::string& node);
  // StopRun (after a Resume, so that the end reaches this controller) to one
  // node; off the loop. `why`: empty for a person's request, else the
  // failure that stops it. Throws when the node cannot be reached.
  void send_stop(const std::string& run, const std::string& node, double grace_s,
                 const std::string& why = {});
  // send_stop on the pool; a node that cannot be reached gets it again every
  // retry_interval until the run has ended. `first_failure`: what to say
  // when the first try fails.
  void deliver_stop(const std::string& run, const std::string& node, double grace_s,
                    const std::string& why, std::string first_failure);
  // Any thread: a timer on the loop that tries again unless the run has ended.
  void retry_stop_later(const std::string& run, const std::string& node, double grace_s,
                        const std::string& why);
  // After a node's link closed (loop): tells a lost agent from an
  // unreachable node, then reconnects and resumes its live runs from the
  // last stored record every retry_interval until it can or none is live.
  void link_closed(const std::string& node, int64_t closed_ms);
  void reconnect_later(const std::string& node, bool unreachable);
  void mark_unreachable(const std::string& node, int64_t since_ms);
  // Whether the node's SSH port answers (NodeConnection::answers); off the loop.
  bool node_answers(const std::string& node) const;
  // A node marked unreachable (its link went silent, its port does not
  // answer) while a node failed the run: the stop cannot reach its ranks.
  // When every node that has not ended such a run is unreachable, the run
  // ends failed naming them; their ranks end by their own stall watchdog
  // and what they recorded since stays in their spools.
  void end_runs_left_to_unreachable_nodes();
  void end_if_only_unreachable_nodes_left(const std::string& run);
  // A node failed the run (it could not start there, or its ranks failed):
  // the ranks on `nodes` are stopped now rather than waiting out their
  // rendezvous, and the run's end stays that failure, not `killed`.
  void stop_after_failure(const std::string& run, const std::string& failed_node,
                          const std::vector<std::string>& nodes);
  // A run's end on one node; the run ends once every node has ended it.
  void node_ended(const std::string& node, const protocol::RunEnd& end);
  // Stores the move (if the state machine allows it) and tells the observer.
  bool move_run(const std::string& run, RunState state, const std::string& reason = {});
  void handle(const std::string& node, const protocol::Message& message);

  // The controller's stall watchdog (controller_stalls.cpp). A node's own
  // watchdog (the agent's supervisor) cannot notice its whole host frozen:
  // nothing there runs. So the controller notes when it last heard from each
  // node of a live run (any record, the supervisor's 1 s system samples
  // among them), and a node whose link is up that sends nothing for the
  // run's stall_timeout_s ends the run failed, naming it and its ranks' last
  // steps. A node whose link is down, or whose SSH port does not answer, is
  // left to the unreachable-node path instead (controller_links.cpp).
  void heard_from(const std::string& run, const std::string& node,
                  const protocol::Record* record = nullptr);
  // Every second on the loop, until the controller closes.
  void check_stalls();
  struct StalledNode {
    std::string node;
    std::map<int64_t, int64_t> last_step;  // by rank; a rank with no step yet is absent
  };
  void end_stalled(const std::string& run, std::chrono::seconds timeout,
                   const std::vector<StalledNode>& stalled);
  void end_run(const std::string& run, RunState state, const std::string& reason);
  void note_problem(const std::string& message);
  // The calls that wait for the loop are refused on it (an observer's call):
  // they would wait for themselves.
  void refuse_on_loop(const char* call) const;
  // Runs `work` on the bounded pool (not once closing).
  void in_background(std::function<void()> work);

  Store& store_;
  ControllerOptions options_;
  std::atomic<ControllerObserver*> observer_{nullptr};  // read on the loop
  int store_listener_ = -1;    // the store's refusals, told to the observer
  int refetch_listener_ = -1;  // records the store let go of, asked of their agent again
  std::atomic<bool> closing_{false};

  // The run state machine: touched by loop tasks only, so without a lock.
  std::set<std::string> followed_;  // runs this controller streams
  std::set<std::string> killing_;   // runs this controller was asked to kill
  std::set<std::string> failing_;   // runs whose other nodes it stopped after a failure
  // While a run's starts are not sent yet: the nodes sent one (the starts
  // go out in one loop task, so a failure is handled before or after all).
  std::map<std::string, std::set<std::string>> starts_sent_;
  // Nodes whose link went silent and whose SSH port does not answer: since
  // when (ms since the epoch); cleared once a link to the node opens.
  std::map<std::string, int64_t> unreachable_since_ms_;
  std::map<std::string, std::shared_ptr<std::promise<protocol::ProbeReply>>> probes_;
  // Per run, the nodes that have ended it, and how.
  std::map<std::string, std::map<std::string, protocol::RunEnd>> node_ends_;
  // What the stall watchdog heard, per live run and node.
  struct NodeHeard {
    std::chrono::steady_clock::time_point at;
    // By rank, its last step record as it came: read for its step only when
    // the node stalls, not on every record of the hot path.
    std::map<int64_t, std::string> last_step_record;
  };
  struct RunHeard {
    std::optional<std::chrono::seconds> stall_timeout;  // read from the stored config once
    std::vector<std::string> members;                   // the run's nodes, from the store too
    std::map<std::string, NodeHeard> nodes;
  };
  std::map<std::string, RunHeard> heard_;
  std::set<std::string> stall_checks_;  // runs whose silent nodes' ports are being tried

  // Runs whose end this controller stored: the loop adds, wait_for_end waits.
  std::mutex ended_mutex_;
  std::condition_variable ended_changed_;
  std::set<std::string> ended_;

  // Connections, shared by whoever connects (callers, the pool) and the loop.
  mutable std::mutex links_mutex_;
  std::map<std::string, std::shared_ptr<AgentLink>> links_;
  std::vector<std::shared_ptr<AgentLink>> closed_links_;  // until their reader has returned
  std::map<std::string, std::string> addresses_;          // node -> where its peers reach it
  struct CheckedConnection {
    std::shared_ptr<NodeConnection> connection;
    std::chrono::steady_clock::time_point opened;
  };
  std::map<std::string, CheckedConnection> checked_connections_;
  void keep_checked_connection(const std::string& node, std::unique_ptr<NodeConnection> connection);
  std::shared_ptr<NodeConnection> take_checked_connection(const std::string& node);
  // options_.connect with the agent binary the controller deploys.
  ConnectOptions connect_options() const;

  std::mutex background_mutex_;  // starting work vs. closing
  std::unique_ptr<QThreadPool> background_;
  std::unique_ptr<EventLoop> loop_;
};

}  // namespace flotilla::controller
