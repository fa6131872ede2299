#include "plan_preview.h"

#include <QCheckBox>
#include <QDateTime>
#include <QFileInfo>
#include <QLabel>
#include <QTextBrowser>
#include <QVBoxLayout>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "flotilla/controller/link_bench.h"
#include "flotilla/controller/node_profiles.h"
#include "flotilla/controller/paths.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::gui {
namespace {

using nlohmann::json;

int64_t integer(const json& j, const char* key, int64_t fallback = 0) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

QString text(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? QString::fromStdString(it->get<std::string>())
                                          : QString();
}

QVector<int64_t> integers(const json& j, const char* key) {
  QVector<int64_t> out;
  const auto it = j.find(key);
  if (it != j.end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_number()) out.push_back(v.get<int64_t>());
  return out;
}

const json& array(const json& j, const char* key) {
  static const json empty = json::array();
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : empty;
}

// 11689512 -> "11,689,512": digits grouped the same in every locale.
QString grouped(int64_t n) {
  QString digits = QString::number(n < 0 ? -n : n);
  for (int i = digits.size() - 3; i > 0; i -= 3) digits.insert(i, ',');
  return (n < 0 ? "-" : "") + digits;
}

QString bytes_text(int64_t bytes) {
  const double b = double(bytes);
  QString scaled;
  if (b >= 1024.0 * 1024 * 1024)
    scaled = QString::fromStdString(format_fixed(b / (1024.0 * 1024 * 1024), 2)) + " GiB";
  else if (b >= 1024.0 * 1024)
    scaled = QString::fromStdString(format_fixed(b / (1024.0 * 1024), 2)) + " MiB";
  else if (b >= 1024.0)
    scaled = QString::fromStdString(format_fixed(b / 1024.0, 1)) + " KiB";
  else
    return grouped(bytes) + " B";
  return grouped(bytes) + " B (" + scaled + ")";
}

// The node set a link bench is stored under (link_bench.h's node_set_key).
QString links_key(const ExperimentConfig& config) {
  return QString::fromStdString(controller::node_set_key(config.nodes));
}

// "measured 5 min ago".
QString age_text(qint64 measured_ms) {
  const double minutes = double(QDateTime::currentMSecsSinceEpoch() - measured_ms) / 60000.0;
  if (minutes < 1) return "measured just now";
  if (minutes < 120) return "measured " + QString::number(int(minutes)) + " min ago";
  if (minutes < 48 * 60) return "measured " + QString::number(int(minutes / 60)) + " h ago";
  return "measured " + QString::number(int(minutes / 1440)) + " days ago";
}

// The age of the bench in the --links JSON (its measured_ms).
QString bench_age(const QString& links_json) {
  const auto doc = json::parse(links_json.toStdString(), nullptr, false);
  if (!doc.is_object() || !doc.contains("measured_ms") || !doc["measured_ms"].is_number())
    return {};
  return age_text(doc["measured_ms"].get<int64_t>());
}

QString ms_text(double ms) {
  return QString::fromStdString(format_fixed(ms, ms < 10 ? 2 : 1)) + " ms";
}

QString list_text(const QVector<int64_t>& v) {
  QStringList parts;
  for (auto x : v) parts << QString::number(x);
  return "[" + parts.join(", ") + "]";
}

}  // namespace

PlanNumbers parse_plan(const QByteArray& printed) {
  const json j = json::parse(printed.toStdString(), nullptr, false);
  if (!j.is_object() || j.value("type", "") != "plan")
    throw std::runtime_error(
        "flotilla-train --plan printed no plan (a JSON object of type \"plan\")");
  PlanNumbers p;
  p.model = text(j, "model");
  p.strategy = text(j, "strategy");
  p.schedule = text(j, "schedule");
  p.codec = text(j, "codec");
  p.world_size = integer(j, "world_size");
  p.replicas = integer(j, "replicas", 1);
  p.stages = integer(j, "stages", 1);
  p.chunks = integer(j, "chunks", 1);
  p.batch_size = integer(j, "batch_size");
  p.micro_batch_sizes = integers(j, "micro_batch_sizes");
  if (const auto it = j.find("balance"); it != j.end() && it->is_object()) {
    p.balance = integers(*it, "blocks_per_stage");
    p.balance_source = text(*it, "source");
    if (const auto ms = it->find("took_ms"); ms != it->end() && ms->is_number())
      p.balance_ms = ms->get<double>();
  }
  p.parameters = integer(j, "parameters");
  p.trainable_parameters = integer(j, "trainable_parameters", p.parameters);
  for (const auto& b : array(j, "blocks"))
    p.blocks.push_back({integer(b, "index"), text(b, "name"), text(b, "kind"),
                        integer(b, "parameters"), integer(b, "trainable")});
  for (const auto& s : array(j, "stage_plans")) {
    PlanNumbers::Stage stage{integer(s, "stage"), integer(s, "first_block"), integer(s, "blocks"),
                             integer(s, "parameters"), integer(s, "trainable")};
    if (const auto it = s.find("allreduce"); it != s.end() && it->is_object()) {
      stage.allreduce_ranks = integer(*it, "ranks");
      stage.allreduce_bytes = integer(*it, "bytes_per_step");
      stage.allreduce_buckets = integer(*it, "buckets");
    }
    p.stage_list.push_back(stage);
  }
  for (const auto& r : array(j, "ranks"))
    p.ranks.push_back({integer(r, "rank"), integer(r, "node_index"), integer(r, "local_rank"),
                       integer(r, "stage"), integer(r, "replica"), text(r, "node")});
  const auto transfer = [](const json& b, const char* key) {
    PlanNumbers::Transfer t;
    if (const auto it = b.find(key); it != b.end() && it->is_object()) {
      t.sent = it->value("sent", false);
      t.fp32_bytes = integer(*it, "fp32_bytes");
      t.wire_bytes = integer(*it, "wire_bytes");
    }
    return t;
  };
  for (const auto& b : array(j, "boundaries"))
    p.boundaries.push_back({integer(b, "boundary"), integers(b, "shape"),
                            transfer(b, "activations"), transfer(b, "gradients")});
  if (const auto it = j.find("elastic"); it != j.end() && it->is_object()) {
    p.elastic_costs = text(*it, "costs");
    for (const auto& e : array(*it, "layouts"))
      p.elastic.push_back({integer(e, "frozen_blocks"), integer(e, "at_step", -1),
                           integer(e, "stages", 1), integer(e, "replicas", 1),
                           integers(e, "balance")});
  }
  if (p.blocks.isEmpty()) throw std::runtime_error("flotilla-train --plan listed no blocks");
  if (const auto& pr = j.value("prediction", json()); pr.is_object()) {
    PlanNumbers::Prediction prediction;
    prediction.step_ms = pr.value("step_ms", 0.0);
    prediction.samples_per_s = pr.value("samples_per_s", 0.0);
    prediction.compute_ms = pr.value("compute_ms", 0.0);
    prediction.exposed_ms = pr.value("exposed_comm_ms", 0.0);
    prediction.bubble = pr.value("bubble_fraction", 0.0);
    prediction.samples_per_step = pr.value("samples_per_step", int64_t{0});
    prediction.micro_batch = pr.value("micro_batch", int64_t{0});
    if (pr.contains("links") && pr["links"].is_string())
      prediction.links = QString::fromStdString(pr["links"].get<std::string>());
    if (const auto& blocks = pr.value("block_costs", json::object()); blocks.is_object()) {
      prediction.from_profile = blocks.value("source", "") == "profile";
      if (blocks.value("source", "") == "node_profile" && blocks.contains("node") &&
          blocks["node"].is_string())
        prediction.profile_node = QString::fromStdString(blocks["node"].get<std::string>());
      prediction.profile_measured_ms = blocks.value("measured_ms", int64_t{0});
    }
    for (const auto& note : pr.value("notes", json::array()))
      if (note.is_string()) prediction.notes << QString::fromStdString(note.get<std::string>());
    for (const auto& stage : pr.value("stages", json::array())) {
      prediction.stage_ms << stage.value("forward_ms", 0.0) + stage.value("backward_ms", 0.0);
      prediction.stage_peak_memory_bytes << stage.value("peak_memory_bytes", int64_t{0});
    }
    prediction.peak_memory_bytes = pr.value("peak_memory_bytes", int64_t{0});
    prediction.memory_on_gpu =
        pr.value("memory", json::object()).value("measured_as", "") == "cuda_allocator";
    p.prediction = prediction;
  }
  return p;
}

PlanPreview::PlanPreview(QWidget* parent)
    : QWidget(parent),
      program_(QString::fromStdString(controller::sibling_program("flotilla-train").string())) {
  status_ = new QLabel;
  status_->setObjectName("planStatus");
  status_->setWordWrap(true);
  measure_ = new QCheckBox("Measure the balance (times every block; takes seconds)");
  measure_->setObjectName("planMeasure");
  measure_->setToolTip(
      "Without a balance the engine's rank 0 times every block and cuts the model where the "
      "slowest stage is fastest; checked, the preview does the same. Unchecked it shows an "
      "estimate from parameter counts, marked as such.");
  predict_ = new QCheckBox("Predict the step (times the blocks here, or takes a node's profile)");
  predict_->setObjectName("planPredict");
  predict_->setToolTip(
      "Times each block's forward and backward, the optimizer and the codec on this machine, "
      "as a rank would, and replays the step's schedule on them and on the newest link bench "
      "of the experiment's nodes (`flotilla nodes bench`). docs/predict.md says what it assumes.");
  view_ = new QTextBrowser;
  view_->setObjectName("planView");
  view_->setOpenLinks(false);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* title = new QLabel("<b>Plan preview</b>");
  layout->addWidget(title);
  layout->addWidget(status_);
  layout->addWidget(measure_);
  layout->addWidget(predict_);
  layout->addWidget(view_, 1);
  layout->addStretch();
  debounce_.setSingleShot(true);
  debounce_.setInterval(400);
  connect(&debounce_, &QTimer::timeout, this, &PlanPreview::start);
  connect(measure_, &QCheckBox::toggled, this, [this] {
    if (pending_) debounce_.start(0);
  });
  connect(predict_, &QCheckBox::toggled, this, [this] {
    if (pending_) debounce_.start(0);
  });
  setState(State::idle, "The plan appears once the experiment is valid.");
}

PlanPreview::~PlanPreview() {
  if (process_) {
    process_->disconnect(this);
    process_->kill();
    process_->waitForFinished(2000);
  }
}

void PlanPreview::setProgram(const QString& program) {
  program_ = program;
}

void PlanPreview::setPredicting(bool on) {
  predict_->setChecked(on);
}

void PlanPreview::setLinkBenches(const QHash<QString, QString>& benches) {
  if (benches == link_benches_) return;
  // A bench of the nodes shown that differs from the one the prediction
  // used (a first one, or a newer one) changes the prediction.
  const QString used = link_benches_.value(links_used_);
  link_benches_ = benches;
  if (pending_ && predict_->isChecked() && benches.value(links_key(*pending_)) != used)
    debounce_.start(0);
}

// The first of the run's nodes that has stored profiles; empty: none has.
QString PlanPreview::profiledNode() const {
  if (!pending_) return {};
  for (const auto& node : pending_->nodes)
    if (node_profiles_.contains(QString::fromStdString(node))) return QString::fromStdString(node);
  return {};
}

void PlanPreview::setNodeProfiles(const QHash<QString, QString>& profiles) {
  if (profiles == node_profiles_) return;
  const QString before = node_profiles_.value(profiles_used_);
  node_profiles_ = profiles;
  if (pending_ && predict_->isChecked() && profiles.value(profiledNode()) != before)
    debounce_.start(0);
}

void PlanPreview::request(const std::optional<ExperimentConfig>& config) {
  pending_ = config;
  if (!config) {
    debounce_.stop();
    if (process_) {
      process_->disconnect(this);
      process_->kill();
      process_.release()->deleteLater();
    }
    numbers_ = {};
    view_->clear();
    setState(State::idle, "The plan appears once the experiment is valid.");
    return;
  }
  if (state_ != State::computing) setState(State::waiting, "Waiting for the form to settle…");
  debounce_.start();
}

void PlanPreview::start() {
  if (!pending_) return;
  if (!QFileInfo(program_).isExecutable()) {
    setState(State::unavailable,
             "No plan preview: " + program_ +
                 " is not there. flotilla-train comes with the engine, which a gui-only build "
                 "leaves out.");
    return;
  }
  if (process_) {  // superseded: its answer is for an older config
    process_->disconnect(this);
    process_->kill();
    process_.release()->deleteLater();
  }
  static int serial = 0;
  const QString file = dir_.filePath(QString("plan-%1.json").arg(++serial));
  {
    std::ofstream out(file.toStdString());
    out << to_json(*pending_);
  }
  QStringList args{"--plan", "--config", file};
  if (measure_->isChecked()) args << "--measure";
  links_used_.clear();
  profiles_used_.clear();
  if (predict_->isChecked()) {
    args << "--predict";
    const QString key = links_key(*pending_);
    if (link_benches_.contains(key)) {
      const QString links = dir_.filePath(QString("links-%1.json").arg(serial));
      std::ofstream(links.toStdString()) << link_benches_.value(key).toStdString();
      args << "--links" << links;
      links_used_ = key;
    }
    profiles_used_ = profiledNode();
    if (!profiles_used_.isEmpty()) {
      const QString folder = dir_.filePath(QString("node-profiles-%1").arg(serial));
      const auto profiles =
          json::parse(node_profiles_.value(profiles_used_).toStdString(), nullptr, false);
      std::vector<std::string> files;
      if (profiles.is_array())
        for (const auto& p : profiles) files.push_back(p.dump());
      controller::write_node_profiles(files, folder.toStdString());
      args << "--node-profiles" << folder << "--profile-node" << profiles_used_;
    }
  }
  process_ = std::make_unique<QProcess>();
  process_->setProgram(program_);
  process_->setArguments(args);
  connect(process_.get(), &QProcess::finished, this, &PlanPreview::finished);
  connect(process_.get(), &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart)
      setState(State::unavailable, "No plan preview: " + program_ + " does not start (" +
                                       process_->errorString() + ")");
  });
  clock_.start();
  setState(State::computing, "computing…");
  process_->start();
}

void PlanPreview::finished(int exit_code, QProcess::ExitStatus status) {
  const QByteArray out = process_->readAllStandardOutput();
  const QString err = QString::fromUtf8(process_->readAllStandardError()).trimmed();
  const qint64 ms = clock_.elapsed();
  process_.release()->deleteLater();
  if (status == QProcess::NormalExit && exit_code != 0 && err.contains("--plan") &&
      err.contains("not expected")) {
    // An engine from before plan mode: say what is missing, never a guess.
    numbers_ = {};
    view_->clear();
    setState(State::unavailable, "The plan preview needs flotilla-train --plan, which " + program_ +
                                     " does not have yet (it comes with the engine's "
                                     "plan mode).");
    return;
  }
  if (status != QProcess::NormalExit || exit_code != 0) {
    numbers_ = {};
    view_->clear();
    setState(State::failed, "flotilla-train --plan " +
                                (status == QProcess::NormalExit
                                     ? "exited with status " + QString::number(exit_code)
                                     : QString("crashed")) +
                                (err.isEmpty() ? QString() : ":\n" + err));
    return;
  }
  try {
    numbers_ = parse_plan(out);
  } catch (const std::exception& e) {
    numbers_ = {};
    view_->clear();
    setState(State::failed, QString::fromStdString(e.what()));
    return;
  }
  render();
  setState(State::shown,
           "Computed by flotilla-train --plan in " + QString::number(ms) + " ms" +
               (numbers_.balance_source == "measured"
                    ? " (balance measured in " +
                          QString::fromStdString(format_fixed(numbers_.balance_ms, 0)) + " ms)"
                    : QString()));
}

void PlanPreview::setState(State state, const QString& text) {
  state_ = state;
  status_->setText(text);
  const bool bad = state == State::failed || state == State::unavailable;
  status_->setStyleSheet(bad ? "color: #c62828;" : "color: #555;");
  // Only numbers the engine printed are shown; without them, only the reason.
  view_->setVisible(state == State::shown || state == State::computing || state == State::waiting);
  emit stateChanged(state);
}

QString PlanPreview::statusText() const {
  return status_->text();
}

QString PlanPreview::shownText() const {
  return view_->toPlainText();
}

QString PlanPreview::prediction_html() const {
  const auto& pr = *numbers_.prediction;
  QString html = "<p><b>Predicted step</b>: " + ms_text(pr.step_ms) + " = <b>" +
                 grouped(static_cast<int64_t>(pr.samples_per_s + 0.5)) + " samples/s</b> (" +
                 QString::number(pr.samples_per_step) +
                 " samples a step)<br>busiest rank computes " + ms_text(pr.compute_ms) +
                 ", waits or communicates " + ms_text(pr.exposed_ms);
  if (numbers_.stages > 1) {
    html += ", bubble " + QString::fromStdString(format_fixed(100 * pr.bubble, 1)) + " %<br>";
    QStringList stages;
    for (double ms : pr.stage_ms) stages << ms_text(ms);
    html += "stage forward + backward a micro-batch: " + stages.join(", ");
  }
  if (pr.peak_memory_bytes > 0) {
    html += "<br>peak memory <b>" + bytes_text(pr.peak_memory_bytes) +
            "</b> on the fullest rank (" + (pr.memory_on_gpu ? "GPU allocator" : "resident") + ")";
    if (pr.stage_peak_memory_bytes.size() > 1) {
      QStringList stages;
      for (int64_t bytes : pr.stage_peak_memory_bytes) stages << bytes_text(bytes);
      html += ": stages " + stages.join(", ");
    }
  }
  if (!pr.profile_node.isEmpty())
    html += "<br>blocks from node " + pr.profile_node.toHtmlEscaped() + "'s profile (" +
            age_text(pr.profile_measured_ms) + ")";
  else if (pr.from_profile)
    html += "<br>blocks from this machine's profile (" + age_text(pr.profile_measured_ms) + ")";
  else
    html += "<br>blocks timed on this machine";
  html += " on " + QString::number(pr.micro_batch) + " samples";
  const bool remote = pending_ && !(pending_->nodes.size() == 1 && pending_->nodes[0] == "local");
  if (pr.profile_node.isEmpty() && profiles_used_.isEmpty() && remote)
    html += "<br><span style='color:#c62828'>No block profile of " +
            links_key(*pending_).toHtmlEscaped() +
            ": the blocks were timed on this machine. <code>flotilla nodes profile " +
            QString::fromStdString(pending_->nodes.front()).toHtmlEscaped() +
            " RUN.yaml</code> times them there.</span>";
  if (!pr.links.isEmpty()) {
    const QString age = bench_age(link_benches_.value(links_used_));
    html += "<br>links: " + pr.links.toHtmlEscaped() + (age.isEmpty() ? "" : "; " + age);
  } else if (numbers_.world_size > 1) {
    const QString nodes = pending_ ? links_key(*pending_) : QString();
    html += "<br><span style='color:#c62828'>No link bench for " + nodes.toHtmlEscaped() +
            ": communication is not counted. <code>flotilla nodes bench " + nodes.toHtmlEscaped() +
            " --ranks-per-node " + QString::number(pending_ ? pending_->ranks_per_node : 1) +
            "</code> measures it.</span>";
  }
  for (const auto& note : pr.notes)
    if (!note.startsWith("no link bench")) html += "<br><i>" + note.toHtmlEscaped() + "</i>";
  return html + "</p>";
}

void PlanPreview::render() {
  const auto& p = numbers_;
  QString html =
      "<style>td,th{padding:1px 6px;} th{background:#eee;text-align:left;}"
      "td.n{text-align:right;}</style>";
  html += "<p><b>" + p.model.toHtmlEscaped() + "</b>: " + QString::number(p.blocks.size()) +
          " blocks, " + grouped(p.parameters) + " parameters (" + grouped(p.trainable_parameters) +
          " trainable)<br>" + QString::number(p.world_size) +
          (p.world_size == 1 ? " rank" : " ranks");
  if (p.stages > 1) {
    QStringList micro;
    for (auto m : p.micro_batch_sizes) micro << QString::number(m);
    html += " = " + QString::number(p.replicas) + " replica" + (p.replicas > 1 ? "s" : "") + " × " +
            QString::number(p.stages) + " stages<br>" + p.schedule.toHtmlEscaped() +
            ", micro-batches [" + micro.join(", ") + "] of a batch of " +
            QString::number(p.batch_size) + "<br>balance " + list_text(p.balance) + " (" +
            p.balance_source.toHtmlEscaped() + ")<br>codec " + p.codec.toHtmlEscaped();
  }
  html += "</p>";
  if (p.prediction) html += prediction_html();
  if (!p.elastic_costs.isEmpty()) {
    // The sequence AutoPipe + AutoDP is to go through, by the trainer's rule.
    html += "<p><b>Elastic pipeline</b> (AutoPipe + AutoDP, block costs " +
            p.elastic_costs.toHtmlEscaped() + ")<br>";
    if (p.elastic.isEmpty())
      html += "keeps " + QString::number(p.replicas) + " × " + QString::number(p.stages) +
              ": no frozen prefix the freezing can reach lets the pipeline halve";
    QStringList steps;
    for (const auto& e : p.elastic)
      steps << (e.at_step > 0 ? "from step " + QString::number(e.at_step) : QString("when")) +
                   " (" + QString::number(e.frozen_blocks) +
                   " blocks frozen): " + QString::number(e.replicas) + " replica" +
                   (e.replicas > 1 ? "s" : "") + " × " + QString::number(e.stages) +
                   (e.stages > 1 ? " stages " : " stage ") + list_text(e.balance);
    html += steps.join("<br>") + "</p>";
  }

  html +=
      "<p><b>Stages</b></p><table><tr><th>Stage</th><th>Blocks</th><th>Trainable</th>"
      "<th>All-reduce / step</th></tr>";
  for (const auto& s : p.stage_list) {
    const QString blocks = s.blocks == 1 ? QString::number(s.first_block)
                                         : QString::number(s.first_block) + "–" +
                                               QString::number(s.first_block + s.blocks - 1);
    html += "<tr><td>" + QString::number(s.stage) + "</td><td>" + blocks + "</td><td class=n>" +
            grouped(s.trainable) + "</td><td class=n>" +
            (s.allreduce_ranks > 0 ? bytes_text(s.allreduce_bytes) + " over " +
                                         QString::number(s.allreduce_ranks) + " ranks"
                                   : QString("none")) +
            "</td></tr>";
  }
  html += "</table>";
  if (!p.boundaries.isEmpty()) {
    html +=
        "<p><b>Stage boundaries</b> (one micro-batch)</p><table><tr><th>After stage</th>"
        "<th>Activation</th><th>fp32</th><th>After the codec</th></tr>";
    for (const auto& b : p.boundaries)
      html += "<tr><td>" + QString::number(b.boundary) + "</td><td>" + list_text(b.shape) +
              "</td><td class=n>" + bytes_text(b.activations.fp32_bytes) + "</td><td class=n>" +
              bytes_text(b.activations.wire_bytes) + "</td></tr>";
    html += "</table>";
  }
  html += "<p><b>Ranks</b></p><table><tr><th>Rank</th><th>Node</th><th>Local rank</th>";
  if (p.stages > 1) html += "<th>Stage</th><th>Replica</th>";
  html += "</tr>";
  for (const auto& r : p.ranks) {
    html += "<tr><td>" + QString::number(r.rank) + "</td><td>" + r.node.toHtmlEscaped() +
            "</td><td>" + QString::number(r.local_rank) + "</td>";
    if (p.stages > 1)
      html +=
          "<td>" + QString::number(r.stage) + "</td><td>" + QString::number(r.replica) + "</td>";
    html += "</tr>";
  }
  html +=
      "</table><p><b>Blocks</b></p><table><tr><th>#</th><th>Block</th><th>Parameters</th>"
      "</tr>";
  for (const auto& b : p.blocks)
    html += "<tr><td>" + QString::number(b.index) + "</td><td>" + b.name.toHtmlEscaped() +
            (b.trainable == 0 && b.parameters > 0 ? QString(" (frozen)") : QString()) +
            "</td><td class=n>" + grouped(b.parameters) + "</td></tr>";
  html += "</table>";
  view_->setHtml(html);
}

}  // namespace flotilla::gui
