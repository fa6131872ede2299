#include "controller_worker.h"

#include "flotilla/controller/link_bench.h"
#include "flotilla/controller/node_profiles.h"

#include "flotilla/controller/sweep_store.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "flotilla/controller/nodes.h"
#include "flotilla/controller/report.h"
#include "flotilla/controller/sweep_plan.h"

namespace flotilla::gui {

ControllerWorker::ControllerWorker(QString database, std::filesystem::path agent_binary,
                                   bool view_only)
    : database_(std::move(database)),
      agent_binary_(std::move(agent_binary)),
      view_only_(view_only) {
  qRegisterMetaType<QVector<ExperimentItem>>();
  qRegisterMetaType<QVector<RunItem>>();
  qRegisterMetaType<QVector<NodeItem>>();
  qRegisterMetaType<QHash<QString, QString>>();
  qRegisterMetaType<NodeItem>();
  qRegisterMetaType<NodeProbeResult>();
  qRegisterMetaType<SweepPlanItem>();
  qRegisterMetaType<std::shared_ptr<const controller::CompareTable>>();
  connect_.agent_binary = agent_binary_;
  background_.setMaxThreadCount(kBackgroundThreads);
  // Local ranks busy on every core run below the window, which stays the
  // one a person is waiting on (issue 22: the window answered after seconds
  // with four local ranks on two cores).
  connect_.local_agent_niceness = kLocalAgentNiceness;
}

ControllerWorker::~ControllerWorker() {
  // Probes end by their connect timeout at the latest; they call into this object.
  background_.waitForDone();
  // The sweeps' live runs go on; a later start of the window or `flotilla
  // attach` continues them.
  sweeps_.reset();
  controller_.reset();  // links close first; their threads call into this object
  if (store_ && store_listener_ >= 0) store_->remove_problem_listener(store_listener_);
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
    // Called on the store's writer thread; the signals are queued to the window.
    store_listener_ = store_->add_problem_listener([this](const controller::StoreProblem& p) {
      const auto message = QString::fromStdString(p.message);
      if (p.resolved)
        emit databaseTakesWrites(message);
      else
        emit databaseRefusesWrites(message);
    });
    controller::ControllerOptions options;
    options.agent_binary = agent_binary_;
    options.connect = connect_;
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
  refreshLists(false);
}

void ControllerWorker::refreshIfChanged() {
  refreshLists(true);
}

void ControllerWorker::refreshLists(bool only_changes) {
  if (!store_) return;
  try {
    // Read before the lists: a change committed meanwhile is read next time.
    const int64_t version = store_->data_version();
    if (only_changes && refreshed_version_ == version) return;
    refreshed_version_ = version;
    QVector<ExperimentItem> experiments;
    for (const auto& e : store_->experiments())
      experiments.push_back(
          {QString::fromStdString(e.name), QString::fromStdString(e.config_json)});
    if (!only_changes || experiments != experiments_) emit experimentsChanged(experiments);
    experiments_ = experiments;
    QVector<RunItem> runs;
    for (const auto& r : store_->runs())
      runs.push_back({QString::fromStdString(r.id), QString::fromStdString(r.experiment_name),
                      QString::fromUtf8(name_of(r.state).data(), name_of(r.state).size()),
                      QString::fromStdString(r.reason), QString::fromStdString(join_list(r.nodes)),
                      r.world_size, r.created_ms, QString::fromStdString(r.config_json)});
    if (!only_changes || runs != runs_) emit runsChanged(runs);
    runs_ = runs;
    emitNodes(only_changes);
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

void ControllerWorker::trustHostKeyAndRun(const QString& node, const QString& fingerprint,
                                          const QString& config_json) {
  if (!controller_) return;
  try {
    controller_->trust_host_key(node.toStdString(), fingerprint.toStdString());
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
    return;
  }
  startRun(config_json);
}

void ControllerWorker::resumeRun(const QString& run) {
  if (!controller_) return emit failed("Cannot resume run " + run + ": the window only views");
  try {
    controller_->resume_run(run.toStdString());
  } catch (const ConfigError& e) {
    QStringList problems;
    for (const auto& p : e.problems()) problems << QString::fromStdString(p);
    emit failed("Run " + run + " cannot be resumed: " + problems.join("; "));
  } catch (const std::exception& e) {
    emit failed("Run " + run + " cannot be resumed: " + QString::fromStdString(e.what()));
  }
}

void ControllerWorker::killRun(const QString& run) {
  if (!controller_) return;
  try {
    controller_->kill_run(run.toStdString());
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::compareRuns(const QStringList& runs, const QString& baseline,
                                   quint64 request) {
  if (!store_) {
    emit compareFailed("the database " + database_ + " is not open", request);
    return;
  }
  try {
    std::vector<std::string> ids;
    for (const auto& run : runs) ids.push_back(run.toStdString());
    controller::CompareOptions options;
    if (!baseline.isEmpty()) options.baseline = baseline.toStdString();
    emit compared(std::make_shared<const controller::CompareTable>(
                      controller::compare_runs(*store_, ids, options)),
                  request);
  } catch (const controller::CompareError& e) {
    QStringList problems;
    for (const auto& p : e.problems()) problems << QString::fromStdString(p);
    emit compareFailed(problems.join("\n"), request);
  } catch (const std::exception& e) {
    emit compareFailed(QString::fromStdString(e.what()), request);
  }
}

void ControllerWorker::writeReport(const QStringList& runs, const QString& baseline,
                                   const QString& directory) {
  if (!store_) return emit reportFailed("the database " + database_ + " is not open");
  std::shared_ptr<const controller::CompareTable> table;
  try {
    std::vector<std::string> ids;
    for (const auto& run : runs) ids.push_back(run.toStdString());
    controller::CompareOptions options;
    if (!baseline.isEmpty()) options.baseline = baseline.toStdString();
    table = std::make_shared<const controller::CompareTable>(
        controller::compare_runs(*store_, ids, options));
  } catch (const controller::CompareError& e) {
    QStringList problems;
    for (const auto& p : e.problems()) problems << QString::fromStdString(p);
    return emit reportFailed(problems.join("\n"));
  } catch (const std::exception& e) {
    return emit reportFailed(QString::fromStdString(e.what()));
  }
  controller::ReportOptions options;
  options.directory = directory.toStdString();
  options.database = database_.toStdString();
  background_.start([this, table, options] {
    try {
      const auto result = controller::write_report(*table, options);
      QStringList problems;
      for (const auto& p : result.problems) problems << QString::fromStdString(p);
      emit reportWritten(QString::fromStdString(result.markdown.string()), problems);
    } catch (const std::exception& e) {
      emit reportFailed(QString::fromStdString(e.what()));
    }
  });
}

namespace {
QStringList problem_lines(const ConfigError& e) {
  QStringList lines;
  for (const auto& p : e.problems()) lines << QString::fromStdString(p);
  return lines;
}
}  // namespace

void ControllerWorker::planSweep(const QString& sweep_text, quint64 request) {
  SweepPlanItem plan;
  if (!store_) {
    plan.problems << "the database " + database_ + " is not open";
    return emit sweepPlanned(plan, request);
  }
  try {
    auto spec = parse_sweep(sweep_text.toStdString(), "sweep");
    plan.name = QString::fromStdString(spec.name);
    const auto points = controller::plan_sweep(*store_, controller_.get(), spec);
    plan.runs = static_cast<qint64>(points.size());
    plan.shape = QString::fromStdString(controller::sweep_grid_shape(spec));
    for (const auto& point : points) {
      if (!point.refused()) {
        ++plan.to_run;
        continue;
      }
      SweepPlanItem::Refused refused{
          point.index + 1, QString::fromStdString(point.values_json), {}};
      for (const auto& p : point.problems) refused.problems << QString::fromStdString(p);
      plan.refused.push_back(refused);
    }
  } catch (const ConfigError& e) {
    plan.problems = problem_lines(e);
  } catch (const std::exception& e) {
    plan.problems << QString::fromStdString(e.what());
  }
  emit sweepPlanned(plan, request);
}

void ControllerWorker::startSweep(const QString& sweep_text, const QString& source) {
  if (!controller_ || !sweeps_)
    return emit sweepRefused("the window only views this database: it starts nothing");
  try {
    auto spec = parse_sweep(sweep_text.toStdString(), source.toStdString());
    const auto points = controller::plan_sweep(*store_, controller_.get(), spec);
    if (std::all_of(points.begin(), points.end(), [](const auto& p) { return p.refused(); }))
      return emit sweepRefused("every point of sweep " + QString::fromStdString(spec.name) +
                               " is refused: nothing to run");
    // Stored without an owner: the pool takes it over at once, as it takes a
    // sweep whose controller is gone, and runs it on a thread of its own.
    controller::SweepStore(*store_).create(spec, points, source.toStdString(), "");
    sweeps_->continue_live_sweeps();
    emit sweepStarted(QString::fromStdString(spec.name));
    refresh();
  } catch (const ConfigError& e) {
    emit sweepRefused(problem_lines(e).join("\n"));
  } catch (const std::exception& e) {
    emit sweepRefused(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::killSweep(const QString& name) {
  if (!controller_) return emit failed("Cannot kill sweep " + name + ": the window only views");
  try {
    controller::SweepStore sweeps(*store_);
    const auto sweep = sweeps.sweep(name.toStdString());
    if (!sweep || !sweeps.kill(sweep->id, "killed from the window")) return;
    for (const auto& point : sweeps.points(sweep->id))
      if (point.state == controller::PointState::running && !point.run_id.empty() &&
          store_->run(point.run_id))
        controller_->kill_run(point.run_id);
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::emitNodes(bool only_changes) {
  QVector<NodeItem> nodes;
  for (const auto& n : store_->nodes()) {
    NodeItem item;
    item.name = QString::fromStdString(n.name);
    item.host = QString::fromStdString(n.host);
    item.user = QString::fromStdString(n.user);
    item.key_file = QString::fromStdString(n.key_file);
    item.remote_dir = QString::fromStdString(n.remote_dir);
    item.tags = QString::fromStdString(n.tags);
    item.agent_path = QString::fromStdString(n.agent_path);
    item.port = n.port;
    item.slurm = n.kind == controller::NodeKind::slurm;
    item.slurm_partition = QString::fromStdString(n.slurm_partition);
    item.slurm_account = QString::fromStdString(n.slurm_account);
    item.torch_prefix = QString::fromStdString(n.torch_prefix);
    item.engine = QString::fromStdString(controller::engine_summary(n));
    item.probe_json = QString::fromStdString(n.probe_json);
    item.probed_ms = n.probed_ms.value_or(0);
    for (const auto& run : store_->live_runs_on(n.name))
      item.live_runs << QString::fromStdString(run);
    nodes.push_back(item);
  }
  if (!only_changes || nodes != nodes_) emit nodesChanged(nodes);
  nodes_ = nodes;
  // The nodes' profiles, read again only when a profile run was added or ended.
  QStringList profile_rows;
  for (const auto& row : controller::node_profiles(*store_, std::nullopt, /*with_records=*/false))
    profile_rows << QString::fromStdString(row.run_id + " " + std::string(name_of(row.state)));
  if (!only_changes || profile_rows != node_profile_rows_) {
    node_profile_rows_ = profile_rows;
    QHash<QString, QString> profiles;
    for (const auto& node : store_->node_names()) {
      const auto usable = controller::usable_node_profiles(*store_, node);
      if (usable.empty()) continue;
      std::string array = "[";
      for (const auto& p : usable) array += (array.size() > 1 ? "," : "") + p;
      profiles.insert(QString::fromStdString(node), QString::fromStdString(array + "]"));
    }
    emit nodeProfilesChanged(profiles);
  }
  // The benches' points are read again only when a bench was added or ended.
  const auto rows = controller::link_benches(*store_);
  QStringList seen;
  for (const auto& row : rows)
    seen << QString::fromStdString(row.run_id + " " + std::string(name_of(row.state)));
  if (only_changes && seen == link_bench_rows_) return;
  link_bench_rows_ = seen;
  QHash<QString, QString> benches;
  for (const auto& row : rows) {
    const auto key = QString::fromStdString(row.node_set);
    if (row.state != controller::RunState::finished || benches.contains(key)) continue;
    if (const auto bench = controller::latest_link_bench(*store_, split_list(row.node_set)))
      benches.insert(key, QString::fromStdString(controller::link_measurements_json(*bench)));
  }
  if (!only_changes || benches != link_benches_) emit linkBenchesChanged(benches);
  link_benches_ = benches;
}

controller::NodeRow node_row_of(const NodeItem& n) {
  controller::NodeRow row;
  row.name = n.name.toStdString();
  row.host = n.host.toStdString();
  row.port = n.port;
  row.user = n.user.toStdString();
  row.key_file = n.key_file.toStdString();
  row.remote_dir = n.remote_dir.toStdString();
  row.tags = n.tags.toStdString();
  row.agent_path = n.agent_path.toStdString();
  row.kind = n.slurm ? controller::NodeKind::slurm : controller::NodeKind::ssh;
  row.slurm_partition = n.slurm_partition.toStdString();
  row.slurm_account = n.slurm_account.toStdString();
  row.torch_prefix = n.torch_prefix.toStdString();
  return row;
}

void ControllerWorker::addNode(const NodeItem& node) {
  if (!store_) return;
  try {
    const auto row = node_row_of(node);
    // The dialog checked already; the store is the last word (a name taken meanwhile).
    if (const auto problems = controller::validate_node(row); !problems.empty())
      throw std::runtime_error("node \"" + row.name + "\" not added: " + problems.front());
    store_->add_node(row);
    emitNodes();
  } catch (const std::exception& e) {
    emit nodeRefused(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::updateNode(const NodeItem& node) {
  if (!store_) return;
  try {
    const auto row = node_row_of(node);
    if (const auto problems = controller::validate_node(row); !problems.empty())
      throw std::runtime_error("node \"" + row.name + "\" not changed: " + problems.front());
    store_->update_node(row);
    emitNodes();
  } catch (const std::exception& e) {
    emit nodeRefused(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::removeNode(const QString& name) {
  if (!store_) return;
  try {
    store_->remove_node(name.toStdString());
    emitNodes();
  } catch (const std::exception& e) {
    emit nodeRefused(QString::fromStdString(e.what()));
  }
}

void ControllerWorker::probeNodes(const QStringList& names) {
  if (!store_) return;
  std::vector<std::string> list;
  for (const auto& n : names) list.push_back(n.toStdString());
  background_.start([this, list, names, options = connect_] {
    const auto progress = [this](const std::string& node, const std::string& line) {
      emit nodeProgress(QString::fromStdString(node), QString::fromStdString(line));
    };
    controller::probe_nodes(
        *store_, list, options,
        [this](const controller::ProbeOutcome& out) {
          NodeProbeResult result;
          result.node = QString::fromStdString(out.node);
          result.reached = out.reached;
          result.error = QString::fromStdString(out.error);
          if (out.host_key)
            result.host_key = *out.host_key == controller::HostKeyError::Kind::unknown
                                  ? NodeProbeResult::HostKey::unknown
                                  : NodeProbeResult::HostKey::changed;
          result.fingerprint = QString::fromStdString(out.fingerprint);
          result.engine_error = QString::fromStdString(out.engine_error);
          emit nodeProbed(result);  // queued to the window
        },
        progress);
    emit probesFinished(names);
    // The store has the answers: list them again, from this worker's own thread.
    QMetaObject::invokeMethod(this, &ControllerWorker::refresh, Qt::QueuedConnection);
  });
}

void ControllerWorker::trustHostKeyAndProbe(const QString& name, const QString& fingerprint) {
  if (!controller_) return;
  try {
    controller_->trust_host_key(name.toStdString(), fingerprint.toStdString());
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
    return;
  }
  probeNodes({name});
}

void ControllerWorker::setConnectTimeout(int milliseconds) {
  connect_.timeout = std::chrono::milliseconds(milliseconds);
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
