#pragma once
// The controller on its own thread, for the window: every slot runs there (so
// SQL, starting agents and waiting on them never block the GUI thread), and
// every result comes back as a queued signal.

#include <QHash>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QThreadPool>
#include <QVector>

#include <filesystem>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "flotilla/controller/compare.h"
#include "flotilla/controller/controller.h"
#include "flotilla/controller/sweep_runner.h"

// Before any signal or slot that carries it (the moc files instantiate it).
Q_DECLARE_METATYPE(std::shared_ptr<const flotilla::controller::CompareTable>)

namespace flotilla::gui {

struct ExperimentItem {
  QString name;
  QString config_json;
  bool operator==(const ExperimentItem& o) const {
    return name == o.name && config_json == o.config_json;
  }
};

struct RunItem {
  QString id, experiment, state, reason, nodes;
  qint64 world_size = 0;
  qint64 created_ms = 0;
  QString config_json;  // as the run was started, for a re-run
  bool operator==(const RunItem& o) const {
    return std::tie(id, experiment, state, reason, nodes, world_size, created_ms, config_json) ==
           std::tie(o.id, o.experiment, o.state, o.reason, o.nodes, o.world_size, o.created_ms,
                    o.config_json);
  }
};

// A stored node, its last probe and the live runs on it.
struct NodeItem {
  QString name, host, user, key_file, remote_dir, tags, agent_path;
  int port = 22;
  bool slurm = false;  // a SLURM cluster's login node
  QString slurm_partition, slurm_account;
  QString torch_prefix;  // the LibTorch its own engine is built against; empty: none named
  QString engine;        // which engine its runs use (controller::engine_summary)
  QString probe_json;    // empty: never probed
  qint64 probed_ms = 0;
  QStringList live_runs;
  bool operator==(const NodeItem& o) const {
    return std::tie(name, host, user, key_file, remote_dir, tags, agent_path, port, slurm,
                    slurm_partition, slurm_account, torch_prefix, engine, probe_json, probed_ms,
                    live_runs) == std::tie(o.name, o.host, o.user, o.key_file, o.remote_dir, o.tags,
                                           o.agent_path, o.port, o.slurm, o.slurm_partition,
                                           o.slurm_account, o.torch_prefix, o.engine, o.probe_json,
                                           o.probed_ms, o.live_runs);
  }
};

// The row the store keeps for a node as the window edits it.
controller::NodeRow node_row_of(const NodeItem& node);

// What a sweep would run (flotilla::controller::plan_sweep, as `flotilla
// sweep --dry-run` prints it), for the sweep designer.
struct SweepPlanItem {
  QString name;
  // Why the sweep as a whole cannot run, each "key: what is wrong"; when
  // there are any, the counts below are empty.
  QStringList problems;
  qint64 runs = 0, to_run = 0;
  QString shape;  // "3 ranks_per_node x 4 batch_size"
  struct Refused {
    qint64 index = 0;  // from 1, as the Sweeps tab numbers points
    QString values_json;
    QStringList problems;
  };
  QVector<Refused> refused;
};

// How one node's probe went.
struct NodeProbeResult {
  QString node;
  bool reached = false;
  QString error;  // why not, when not reached
  enum class HostKey { fine, unknown, changed } host_key = HostKey::fine;
  QString fingerprint;   // of an unknown or changed host key
  QString engine_error;  // reached, but the engine it needs could not be built there
};

class ControllerWorker : public QObject,
                         private controller::ControllerObserver,
                         private controller::SweepObserver {
  Q_OBJECT
 public:
  // How much nicer than the window the local agent and its ranks run.
  static constexpr int kLocalAgentNiceness = 10;
  // `view_only`: the store opened read-only and no controller: nothing is
  // started, resumed or written (the window as --screenshot opens it).
  ControllerWorker(QString database, std::filesystem::path agent_binary, bool view_only = false);
  ~ControllerWorker() override;

 public slots:
  // Opens the database, follows the runs that are still live, continues the
  // live sweeps that no other controller runs, lists everything.
  void open();
  // Reads and sends every list.
  void refresh();
  // The same when the database changed since the last read, sending only
  // the lists that changed (the window's periodic poll: nothing is read or
  // sent while nothing changes).
  void refreshIfChanged();
  void saveExperiment(const QString& name, const QString& config_json);
  // Asks first (hostKeyUnknown) when a node's SSH host key is not known yet.
  void startRun(const QString& config_json);
  // Records the node's host key if it is the one the person confirmed
  // (`fingerprint`, as shown), then starts the run; another key is refused.
  void trustHostKeyAndRun(const QString& node, const QString& fingerprint,
                          const QString& config_json);
  void killRun(const QString& run);
  // A new attempt of an ended run from its newest checkpoint (Controller::resume_run).
  void resumeRun(const QString& run);
  // Marks the sweep killed (its queued points skipped) and kills its live run;
  // the controller running the sweep stores the point's end.
  void killSweep(const QString& sweep);
  // Nodes: what the store refuses comes back through failed().
  void addNode(const flotilla::gui::NodeItem& node);
  void updateNode(const flotilla::gui::NodeItem& node);
  void removeNode(const QString& name);
  // Probes the nodes in parallel on threads of their own, so that this
  // thread (and the window) never waits for SSH: nodeProbed as each is done.
  void probeNodes(const QStringList& names);
  // Records the node's host key if it is the one the person confirmed
  // (`fingerprint`, as shown), then probes it; another key is refused.
  void trustHostKeyAndProbe(const QString& name, const QString& fingerprint);
  // How long connecting to a node and its agent's answers may take.
  void setConnectTimeout(int milliseconds);
  // The compare table of `runs` against `baseline` (empty: the first run),
  // read here so the window never waits on SQL; answered by compared() or
  // compareFailed() with the same `request`.
  void compareRuns(const QStringList& runs, const QString& baseline, quint64 request);
  // `flotilla report` of `runs` into `directory`: the table is read here, the
  // charts are drawn by flotilla-gui --render processes on a thread of its
  // own (seconds), so neither the window nor this worker waits for them.
  // Answered by reportWritten() or reportFailed().
  void writeReport(const QStringList& runs, const QString& baseline, const QString& directory);
  // The plan of the sweep file `sweep_text` (YAML or JSON), its nodes
  // checked as a run's are: answered by sweepPlanned with the same `request`.
  void planSweep(const QString& sweep_text, quint64 request);
  // Stores the sweep with its points and runs it on the sweep pool (a
  // thread of its own, as a sweep the window continues): sweepStarted, or
  // sweepRefused with every problem when it cannot run.
  void startSweep(const QString& sweep_text, const QString& source);

 signals:
  void opened(const QString& database);
  void failed(const QString& message);
  void experimentsChanged(const QVector<flotilla::gui::ExperimentItem>& experiments);
  void runsChanged(const QVector<flotilla::gui::RunItem>& runs);
  void runStarted(const QString& run);
  // A node of the run presents a host key never seen: the window shows the
  // fingerprint and asks whether to trust it.
  void hostKeyUnknown(const QString& node, const QString& fingerprint, const QString& config_json);
  void runStateChanged(const QString& run, const QString& state, const QString& reason);
  void nodesChanged(const QVector<flotilla::gui::NodeItem>& nodes);
  // The newest finished link bench of each node set (node_set_key -> the
  // --links JSON of docs/predict.md), for the plan preview's prediction.
  void linkBenchesChanged(const QHash<QString, QString>& benches);
  // Each node's block profiles a prediction can use (node -> a JSON array of
  // `profile` record bodies, node_profiles.h), for the plan preview.
  void nodeProfilesChanged(const QHash<QString, QString>& profiles);
  // The store refused an add, edit or removal: its words.
  void nodeRefused(const QString& message);
  void nodeProbed(const flotilla::gui::NodeProbeResult& result);
  // Every node of one probeNodes() call is done.
  void probesFinished(const QStringList& names);
  // A line of a node's engine build, as it comes (ProbeProgress).
  void nodeProgress(const QString& node, const QString& line);
  void compared(std::shared_ptr<const flotilla::controller::CompareTable> table, quint64 request);
  // Every problem of the request, one a line (unknown run, baseline not among the runs).
  void compareFailed(const QString& message, quint64 request);
  // The report's Markdown file, and the charts that could not be drawn.
  void reportWritten(const QString& markdown, const QStringList& problems);
  void reportFailed(const QString& message);
  void sweepPlanned(const flotilla::gui::SweepPlanItem& plan, quint64 request);
  void sweepStarted(const QString& sweep);
  void sweepRefused(const QString& message);
  // The database refuses this window's writes (another program holds its
  // lock, its disk is full): records wait in the queue and are retried. Said
  // once a refusal, with the store's words; databaseTakesWrites once every
  // record that waited is stored.
  void databaseRefusesWrites(const QString& message);
  void databaseTakesWrites(const QString& message);

 private:
  // ControllerObserver: called on the controller's loop thread. Records are not
  // forwarded: the dashboard reads them from the store, as for runs started
  // elsewhere.
  void state_changed(const std::string& run, controller::RunState state,
                     const std::string& reason) override;
  // Both observers': a controller's or a sweep's problem.
  void problem(const std::string& message) override;

  void refreshLists(bool only_changes);
  void emitNodes(bool only_changes = false);

  QString database_;
  std::filesystem::path agent_binary_;
  bool view_only_ = false;
  std::unique_ptr<controller::Store> store_;
  int store_listener_ = -1;  // its problem listener, removed before it goes
  std::unique_ptr<controller::Controller> controller_;
  std::unique_ptr<controller::SweepPool> sweeps_;  // stopped before the controller goes
  controller::ConnectOptions connect_;
  // Probes and report writers, off this thread: at most kBackgroundThreads at
  // once (more wait their turn), all waited for when the worker goes.
  static constexpr int kBackgroundThreads = 4;
  QThreadPool background_;
  // What the last refresh read and sent.
  std::optional<int64_t> refreshed_version_;
  QVector<ExperimentItem> experiments_;
  QVector<RunItem> runs_;
  QVector<NodeItem> nodes_;
  QHash<QString, QString> link_benches_;
  QStringList link_bench_rows_;    // each bench's run and state, as last read
  QStringList node_profile_rows_;  // each profile run and its state, as last read
};

}  // namespace flotilla::gui

Q_DECLARE_METATYPE(flotilla::gui::ExperimentItem)
Q_DECLARE_METATYPE(flotilla::gui::RunItem)
Q_DECLARE_METATYPE(flotilla::gui::NodeItem)
Q_DECLARE_METATYPE(flotilla::gui::NodeProbeResult)
Q_DECLARE_METATYPE(flotilla::gui::SweepPlanItem)
