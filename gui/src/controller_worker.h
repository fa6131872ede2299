#pragma once
// The controller on its own thread, for the window: every slot runs there (so
// SQL, starting agents and waiting on them never block the GUI thread), and
// every result comes back as a queued signal.

#include <QObject>
#include <QString>
#include <QVector>

#include <filesystem>
#include <memory>
#include <tuple>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/sweep_runner.h"

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
  bool operator==(const RunItem& o) const {
    return std::tie(id, experiment, state, reason, nodes, world_size, created_ms) ==
           std::tie(o.id, o.experiment, o.state, o.reason, o.nodes, o.world_size, o.created_ms);
  }
};

class ControllerWorker : public QObject,
                         private controller::ControllerObserver,
                         private controller::SweepObserver {
  Q_OBJECT
 public:
  // `view_only`: the store opened read-only and no controller: nothing is
  // started, resumed or written (the window as --screenshot opens it).
  ControllerWorker(QString database, std::filesystem::path agent_binary, bool view_only = false);
  ~ControllerWorker() override;

 public slots:
  // Opens the database, follows the runs that are still live, continues the
  // live sweeps that no other controller runs, lists everything.
  void open();
  void refresh();
  void saveExperiment(const QString& name, const QString& config_json);
  // Asks first (hostKeyUnknown) when a node's SSH host key is not known yet.
  void startRun(const QString& config_json);
  // Records the node's host key as the person confirmed it, then starts the run.
  void trustHostKeyAndRun(const QString& node, const QString& config_json);
  void killRun(const QString& run);

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

 private:
  // ControllerObserver: called on the agent links' threads. Records are not
  // forwarded: the dashboard reads them from the store, as for runs started
  // elsewhere.
  void state_changed(const std::string& run, controller::RunState state,
                     const std::string& reason) override;
  // Both observers': a controller's or a sweep's problem.
  void problem(const std::string& message) override;

  QString database_;
  std::filesystem::path agent_binary_;
  bool view_only_ = false;
  std::unique_ptr<controller::Store> store_;
  std::unique_ptr<controller::Controller> controller_;
  std::unique_ptr<controller::SweepPool> sweeps_;  // stopped before the controller goes
};

}  // namespace flotilla::gui

Q_DECLARE_METATYPE(flotilla::gui::ExperimentItem)
Q_DECLARE_METATYPE(flotilla::gui::RunItem)
