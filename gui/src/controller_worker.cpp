#include "controller_worker.h"

namespace flotilla::gui {

ControllerWorker::ControllerWorker(QString database, std::filesystem::path agent_binary,
                                   bool view_only)
    : database_(std::move(database)),
      agent_binary_(std::move(agent_binary)),
      view_only_(view_only) {
  qRegisterMetaType<QVector<ExperimentItem>>();
  qRegisterMetaType<QVector<RunItem>>();
}

ControllerWorker::~ControllerWorker() {
  // The sweeps' live runs go on; a later start of the window or `flotilla
  // attach` continues them.
  sweeps_.reset();
  controller_.reset();  // links close first; their threads call into this object
}

void ControllerWorker::open() {
  try {
    if (view_only_) {
      store_ = std::make_unique<controller::Store>(database_, controller::StoreAccess::read_only);
      emit opened(database_);
      refresh();
      return;
    }
    store_ = std::make_unique<controller::Store>(database_);
    controller::ControllerOptions options;
    options.agent_binary = agent_binary_;
    controller_ = std::make_unique<controller::Controller>(*store_, options);
    controller_->set_observer(this);
    emit opened(database_);
    refresh();
    controller_->attach_live_runs();
    sweeps_ = std::make_unique<controller::SweepPool>(*store_, *controller_,
                                                      static_cast<SweepObserver*>(this));
    sweeps_->continue_live_sweeps();
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::refresh() {
  if (!store_) return;
  try {
    QVector<ExperimentItem> experiments;
    for (const auto& e : store_->experiments())
      experiments.push_back(
          {QString::fromStdString(e.name), QString::fromStdString(e.config_json)});
    emit experimentsChanged(experiments);
    QVector<RunItem> runs;
    for (const auto& r : store_->runs())
      runs.push_back({QString::fromStdString(r.id), QString::fromStdString(r.experiment_name),
                      QString::fromUtf8(name_of(r.state).data(), name_of(r.state).size()),
                      QString::fromStdString(r.reason), QString::fromStdString(join_list(r.nodes)),
                      r.world_size, r.created_ms});
    emit runsChanged(runs);
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::saveExperiment(const QString& name, const QString& config_json) {
  if (!store_) return;
  try {
    store_->save_experiment(name.toStdString(), config_json.toStdString());
    refresh();
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::startRun(const QString& config_json) {
  if (!controller_) return;
  try {
    const auto config = parse_experiment(config_json.toStdString(), "the form");
    // Host keys are settled before anything is stored or started: one
    // question at a time, the run starts once every key is trusted.
    const auto unknown = controller_->unknown_host_keys(config.nodes);
    if (!unknown.empty()) {
      emit hostKeyUnknown(QString::fromStdString(unknown.front().node),
                          QString::fromStdString(unknown.front().fingerprint), config_json);
      return;
    }
    const auto id = store_->save_experiment(config.name, config_json.toStdString());
    const auto run = controller_->start_run(config, id);
    emit runStarted(QString::fromStdString(run));
    refresh();
  } catch (const ConfigError& e) {
    QString text = "The experiment cannot run:";
    for (const auto& p : e.problems()) text += "\n" + QString::fromStdString(p);
    emit failed(text);
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::trustHostKeyAndRun(const QString& node, const QString& config_json) {
  if (!controller_) return;
  try {
    controller_->trust_host_key(node.toStdString());
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
    return;
  }
  startRun(config_json);
}

void ControllerWorker::killRun(const QString& run) {
  if (!controller_) return;
  try {
    controller_->kill_run(run.toStdString());
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::state_changed(const std::string& run, controller::RunState state,
                                     const std::string& reason) {
  emit runStateChanged(QString::fromStdString(run),
                       QString::fromUtf8(name_of(state).data(), name_of(state).size()),
                       QString::fromStdString(reason));
}

void ControllerWorker::problem(const std::string& message) {
  emit failed(QString::fromStdString(message));
}

}  // namespace flotilla::gui
