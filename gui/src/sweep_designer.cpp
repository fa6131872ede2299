#include "sweep_designer.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <fstream>

#include "flotilla/controller/study.h"
#include "flotilla/protocol/config_keys.h"
#include "flotilla/protocol/sweep.h"
#include "sweep_view.h"

namespace flotilla::gui {
namespace {

using Ordered = nlohmann::ordered_json;

QString q(const std::string& text) {
  return QString::fromStdString(text);
}

// The keys an axis may name, for the key column's list: every key of the
// config table and every section (an axis over `compression` sets its keys
// together). Typing another is allowed; the sweep parser judges it.
QStringList axis_keys() {
  QStringList keys;
  for (const auto& row : config_keys()) {
    if (row.key == "name") continue;
    const QString key = q(row.list_key());
    const int dot = key.indexOf('.');
    if (dot > 0 && !keys.contains(key.left(dot))) keys << key.left(dot);
    if (!keys.contains(key)) keys << key;
  }
  return keys;
}

// "32, 64, 128" from an axis's values (compact JSON each).
QString values_list_text(const std::vector<std::string>& values) {
  QStringList out;
  for (const auto& v : values) {
    const auto value = Ordered::parse(v);
    // A string stays bare unless YAML would read it as something else.
    out << (value.is_string() ? q(value.get<std::string>()) : q(value_text(v)));
  }
  return out.join(", ");
}

// Plan requests are numbered across every designer: the worker answers
// them all on one signal, and each designer takes only its own.
quint64 next_plan_request = 0;

// How long the form waits after an edit before planning (typing goes on).
constexpr int kReplanDelayMs = 150;

}  // namespace

SweepDesigner::SweepDesigner(QWidget* parent) : QDialog(parent), replan_timer_(new QTimer(this)) {
  setWindowTitle("New sweep");
  setObjectName("sweepDesigner");
  replan_timer_->setSingleShot(true);
  replan_timer_->setInterval(kReplanDelayMs);
  connect(replan_timer_, &QTimer::timeout, this, &SweepDesigner::replan);
  buildWidgets();
  resize(1000, 720);
}

void SweepDesigner::buildWidgets() {
  name_ = new QLineEdit;
  name_->setObjectName("sweepName");
  base_ = new QLabel("No base experiment yet");
  base_->setObjectName("sweepBase");
  base_->setWordWrap(true);
  repeat_ = new QSpinBox;
  repeat_->setObjectName("sweepRepeat");
  repeat_->setRange(1, 1000);
  repeat_->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);
  repeat_->setMinimumWidth(90);
  repeat_->setToolTip("Runs of each point, with seeds seed, seed+1, … (the ± of a table)");
  auto* head = new QFormLayout;
  head->addRow("Name", name_);
  head->addRow("Base", base_);
  head->addRow("Repeat", repeat_);

  axes_ = new QTableWidget(0, 3);
  axes_->setObjectName("sweepAxes");
  axes_->setHorizontalHeaderLabels({"Config key", "Values (comma-separated)", "Stop"});
  axes_->verticalHeader()->hide();
  axes_->setSelectionBehavior(QAbstractItemView::SelectRows);
  axes_->setSelectionMode(QAbstractItemView::SingleSelection);
  axes_->horizontalHeader()->setSectionResizeMode(kKeyColumn, QHeaderView::Interactive);
  axes_->horizontalHeader()->setSectionResizeMode(kValuesColumn, QHeaderView::Stretch);
  axes_->horizontalHeader()->setSectionResizeMode(kUntilColumn, QHeaderView::ResizeToContents);
  axes_->setColumnWidth(kKeyColumn, 260);
  add_axis_ = new QPushButton("Add axis");
  add_axis_->setObjectName("addAxisButton");
  remove_axis_ = new QPushButton("Remove axis");
  remove_axis_->setObjectName("removeAxisButton");
  connect(add_axis_, &QPushButton::clicked, this, [this] { addAxis(); });
  connect(remove_axis_, &QPushButton::clicked, this, [this] {
    const auto rows = axes_->selectionModel()->selectedRows();
    removeAxis(rows.isEmpty() ? axes_->rowCount() - 1 : rows.front().row());
  });
  auto* axes_box = new QGroupBox("Axes: the grid is their product, the last row fastest");
  auto* axes_layout = new QVBoxLayout(axes_box);
  axes_layout->addWidget(axes_);
  auto* axis_buttons = new QHBoxLayout;
  axis_buttons->addWidget(add_axis_);
  axis_buttons->addWidget(remove_axis_);
  axis_buttons->addStretch();
  axes_layout->addLayout(axis_buttons);

  run_count_ = new QLabel;
  run_count_->setObjectName("sweepRunCount");
  run_count_->setWordWrap(true);
  problems_label_ = new QLabel;
  problems_label_->setObjectName("sweepProblems");
  problems_label_->setWordWrap(true);
  problems_label_->setStyleSheet("color: #b00020;");
  problems_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  refused_ = new QTableWidget(0, 3);
  refused_->setObjectName("sweepRefusedPoints");
  refused_->setHorizontalHeaderLabels({"#", "Values", "Why the validator refuses it"});
  refused_->verticalHeader()->hide();
  refused_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  refused_->setWordWrap(true);
  refused_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  refused_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
  refused_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Stretch);
  refused_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  auto* refused_box = new QGroupBox("Refused points (not run)");
  auto* refused_layout = new QVBoxLayout(refused_box);
  refused_layout->addWidget(refused_);

  open_ = new QPushButton("Open…");
  open_->setObjectName("openSweepButton");
  open_->setToolTip("Open a sweep file (YAML or JSON)");
  studies_ = new QToolButton;
  studies_->setObjectName("openStudyButton");
  studies_->setText("Open study");
  studies_->setPopupMode(QToolButton::InstantPopup);
  studies_->setToolButtonStyle(Qt::ToolButtonTextOnly);
  studies_->setMinimumWidth(studies_->fontMetrics().horizontalAdvance("Open study") + 36);
  auto* studies_menu = new QMenu(studies_);
  for (const auto& study : controller::study_names())
    for (const auto& scale : controller::study_scales(study)) {
      const QString name = q(study), at = q(scale);
      auto* action = studies_menu->addAction(name + " (" + at + ")");
      action->setObjectName("study:" + name + "." + at);
      connect(action, &QAction::triggered, this, [this, name, at] { openStudy(name, at); });
    }
  studies_->setMenu(studies_menu);
  save_ = new QPushButton("Save as…");
  save_->setObjectName("saveSweepButton");
  start_ = new QPushButton("Start");
  start_->setObjectName("startSweepButton");
  start_->setDefault(true);
  auto* close = new QPushButton("Close");
  connect(open_, &QPushButton::clicked, this, &SweepDesigner::chooseFileToOpen);
  connect(save_, &QPushButton::clicked, this, &SweepDesigner::chooseFileToSave);
  connect(start_, &QPushButton::clicked, this, [this] {
    if (!start_->isEnabled()) return;
    starting_ = true;
    updateStart();
    run_count_->setText("Queuing sweep " + name_->text() + "…");
    emit startRequested(sweep_text_, source_);
  });
  connect(close, &QPushButton::clicked, this, &QDialog::reject);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(open_);
  buttons->addWidget(studies_);
  buttons->addWidget(save_);
  buttons->addStretch();
  buttons->addWidget(start_);
  buttons->addWidget(close);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(head);
  layout->addWidget(axes_box, 2);
  layout->addWidget(run_count_);
  layout->addWidget(problems_label_);
  layout->addWidget(refused_box, 2);
  layout->addLayout(buttons);

  connect(name_, &QLineEdit::textChanged, replan_timer_, qOverload<>(&QTimer::start));
  connect(repeat_, qOverload<int>(&QSpinBox::valueChanged), replan_timer_,
          qOverload<>(&QTimer::start));
  updateStart();
}

int SweepDesigner::addAxis(const QString& key, const QString& values, bool until_oom) {
  const int row = axes_->rowCount();
  axes_->insertRow(row);
  auto* key_box = new QComboBox;
  key_box->setEditable(true);
  key_box->addItems(axis_keys());
  key_box->setInsertPolicy(QComboBox::NoInsert);
  key_box->setCurrentIndex(-1);
  key_box->setEditText(key);
  key_box->setToolTip("A config key (docs/config.md) or a section such as compression");
  auto* values_edit = new QLineEdit(values);
  values_edit->setPlaceholderText("32, 64, 128  or  ddp, pipeline  or  {method: none}");
  auto* until = new QCheckBox("until: oom");
  until->setChecked(until_oom);
  until->setToolTip(
      "After a point runs out of memory, the larger values of this (ascending) axis are "
      "skipped");
  axes_->setCellWidget(row, kKeyColumn, key_box);
  axes_->setCellWidget(row, kValuesColumn, values_edit);
  axes_->setCellWidget(row, kUntilColumn, until);
  connect(key_box, &QComboBox::currentTextChanged, replan_timer_, qOverload<>(&QTimer::start));
  connect(values_edit, &QLineEdit::textChanged, replan_timer_, qOverload<>(&QTimer::start));
  connect(until, &QCheckBox::toggled, replan_timer_, qOverload<>(&QTimer::start));
  replan_timer_->start();
  return row;
}

void SweepDesigner::removeAxis(int row) {
  if (row < 0 || row >= axes_->rowCount()) return;
  axes_->removeRow(row);
  replan_timer_->start();
}

QComboBox* SweepDesigner::keyBox(int row) const {
  return qobject_cast<QComboBox*>(axes_->cellWidget(row, kKeyColumn));
}
QLineEdit* SweepDesigner::valuesEdit(int row) const {
  return qobject_cast<QLineEdit*>(axes_->cellWidget(row, kValuesColumn));
}
QCheckBox* SweepDesigner::untilBox(int row) const {
  return qobject_cast<QCheckBox*>(axes_->cellWidget(row, kUntilColumn));
}

void SweepDesigner::setAxisKey(int row, const QString& key) {
  if (auto* box = keyBox(row)) box->setEditText(key);
}
void SweepDesigner::setAxisValues(int row, const QString& values) {
  if (auto* edit = valuesEdit(row)) edit->setText(values);
}
void SweepDesigner::setAxisUntilOom(int row, bool until_oom) {
  if (auto* box = untilBox(row)) box->setChecked(until_oom);
}
void SweepDesigner::setRepeat(int repeat) {
  repeat_->setValue(repeat);
}
void SweepDesigner::setSweepName(const QString& name) {
  name_->setText(name);
}

void SweepDesigner::startFrom(const QString& config_json) {
  auto base = Ordered::parse(config_json.toStdString(), nullptr, false);
  if (!base.is_object()) base = Ordered::object();
  const QString experiment =
      base.contains("name") && base["name"].is_string() ? q(base["name"].get<std::string>()) : "";
  rest_ = Ordered::object();
  rest_["base"] = base;
  source_ = "window";
  base_->setText(experiment.isEmpty() ? "the experiment in the Experiment tab"
                                      : "experiment " + experiment + " (the Experiment tab's)");
  name_->setText((experiment.isEmpty() ? QString("sweep") : experiment) + "-sweep");
  repeat_->setValue(1);
  axes_->setRowCount(0);
  addAxis();
}

void SweepDesigner::load(const SweepSpec& spec, const QString& source) {
  auto stored = Ordered::parse(sweep_to_json(spec));
  rest_ = Ordered::object();
  for (const auto& [key, value] : stored.items())
    if (key != "name" && key != "axes" && key != "repeat") rest_[key] = value;
  source_ = source;
  base_->setText("from " + source + (spec.description.empty() ? "" : ": " + q(spec.description)));
  name_->setText(q(spec.name));
  repeat_->setValue(static_cast<int>(spec.repeat));
  axes_->setRowCount(0);
  for (const auto& axis : spec.axes) {
    const int row = addAxis(q(axis.key), values_list_text(axis.values), axis.until_oom);
    if (!axis.has_variants()) continue;
    // Named variants are each a mapping merged into the config: kept as the
    // file has them, their labels shown (edit them in the file).
    Ordered variants = Ordered::object();
    for (size_t i = 0; i < axis.values.size(); ++i)
      variants[Ordered::parse(axis.values[i]).get<std::string>()] =
          Ordered::parse(axis.variants[i]);
    valuesEdit(row)->setProperty("variants", q(variants.dump()));
    valuesEdit(row)->setReadOnly(true);
    valuesEdit(row)->setToolTip("Variants, each merged into the config:\n" +
                                q(config_document_to_yaml(variants.dump())));
    keyBox(row)->setEnabled(false);
    untilBox(row)->setEnabled(false);
  }
}

bool SweepDesigner::openFile(const QString& file) {
  try {
    const std::filesystem::path path = file.toStdString();
    load(load_sweep(path), QFileInfo(file).fileName());
    return true;
  } catch (const ConfigError& e) {
    QStringList lines;
    for (const auto& p : e.problems()) lines << q(p);
    problems_ = QStringList{file + " cannot be opened:"} + lines;
    showProblems();
    return false;
  }
}

bool SweepDesigner::openStudy(const QString& name, const QString& scale) {
  try {
    load(controller::load_study(name.toStdString(), scale.toStdString()),
         "study " + name + " (" + scale + ")");
    return true;
  } catch (const ConfigError& e) {
    QStringList lines;
    for (const auto& p : e.problems()) lines << q(p);
    problems_ = QStringList{"study " + name + " (" + scale + ") cannot be opened:"} + lines;
    showProblems();
    return false;
  }
}

Ordered SweepDesigner::document(QStringList* problems) const {
  Ordered doc = Ordered::object();
  doc["name"] = name_->text().trimmed().toStdString();
  if (rest_.contains("description")) doc["description"] = rest_["description"];
  doc["base"] = rest_.contains("base") ? rest_["base"] : Ordered::object();
  if (rest_.contains("on_nodes")) doc["on_nodes"] = rest_["on_nodes"];
  Ordered axes = Ordered::object();
  for (int row = 0; row < axes_->rowCount(); ++row) {
    const QString key = keyBox(row)->currentText().trimmed();
    const QString where = "axes." + key;
    if (key.isEmpty()) {
      *problems << QString("axis %1: choose a config key").arg(row + 1);
      continue;
    }
    if (axes.contains(key.toStdString())) {
      *problems << where + ": given twice; one row an axis";
      continue;
    }
    Ordered axis = Ordered::object();
    const QVariant variants = valuesEdit(row)->property("variants");
    if (variants.isValid()) {
      axis["variants"] = Ordered::parse(variants.toString().toStdString());
      axes[key.toStdString()] = axis;
      continue;
    }
    // The values as YAML reads a flow list: 32 is a number, ddp a name,
    // {method: none} a mapping; the parser names the line of a syntax error.
    try {
      const auto parsed = Ordered::parse(config_document_from_text(
          "values: [" + valuesEdit(row)->text().toStdString() + "]", where.toStdString()));
      axis["values"] = parsed["values"];
    } catch (const ConfigError& e) {
      for (const auto& p : e.problems()) *problems << where + ": values: " + q(p);
      continue;
    }
    if (untilBox(row)->isChecked()) axis["until"] = "oom";
    axes[key.toStdString()] = axis;
  }
  doc["axes"] = axes;
  doc["repeat"] = repeat_->value();
  if (rest_.contains("report")) doc["report"] = rest_["report"];
  return doc;
}

void SweepDesigner::replan() {
  row_problems_.clear();
  const auto doc = document(&row_problems_);
  request_ = ++next_plan_request;
  plan_ = {};
  if (!row_problems_.isEmpty()) {
    sweep_text_.clear();
    problems_ = row_problems_;
    showProblems();
    return;
  }
  sweep_text_ = q(doc.dump());
  run_count_->setText("Counting the runs…");
  updateStart();
  emit planRequested(sweep_text_, request_);
}

bool SweepDesigner::planCurrent() const {
  return !replan_timer_->isActive() && !sweep_text_.isEmpty() && planned_request_ == request_;
}

bool SweepDesigner::settled() const {
  return !replan_timer_->isActive() && (sweep_text_.isEmpty() || planned_request_ == request_);
}

void SweepDesigner::showPlan(const SweepPlanItem& plan, quint64 request) {
  if (request != request_) return;  // the form has changed since
  planned_request_ = request;
  plan_ = plan;
  problems_ = plan.problems;
  showProblems();
}

void SweepDesigner::showProblems() {
  const bool planned = planCurrent() && plan_.problems.isEmpty();
  if (planned)
    run_count_->setText(QString("%1 run(s) (%2): %3 to run, %4 refused")
                            .arg(plan_.runs)
                            .arg(plan_.shape)
                            .arg(plan_.to_run)
                            .arg(plan_.refused.size()));
  else
    run_count_->setText("The sweep cannot run yet:");
  problems_label_->setText(problems_.join("\n"));
  problems_label_->setVisible(!problems_.isEmpty());
  refused_->setRowCount(planned ? plan_.refused.size() : 0);
  if (planned)
    for (int r = 0; r < plan_.refused.size(); ++r) {
      const auto& point = plan_.refused[r];
      const QStringList cells{QString::number(point.index), point_values_text(point.values_json),
                              point.problems.join("\n")};
      for (int c = 0; c < cells.size(); ++c) {
        auto* item = new QTableWidgetItem(cells[c]);
        item->setToolTip(cells[c]);
        refused_->setItem(r, c, item);
      }
    }
  updateStart();
}

void SweepDesigner::updateStart() {
  const bool runnable = !starting_ && planCurrent() && plan_.problems.isEmpty() && plan_.to_run > 0;
  start_->setEnabled(runnable);
  save_->setEnabled(!sweep_text_.isEmpty());
  if (runnable)
    start_->setToolTip(QString("Queue the %1 run(s) on the controller").arg(plan_.to_run));
  else if (planCurrent() && plan_.problems.isEmpty() && plan_.to_run == 0)
    start_->setToolTip("Every point is refused: nothing to run");
  else
    start_->setToolTip("Not yet:\n" + problems_.join("\n"));
}

void SweepDesigner::sweepStarted(const QString& sweep) {
  if (!starting_) return;
  starting_ = false;
  emit started(sweep);
  accept();
}

void SweepDesigner::sweepRefused(const QString& message) {
  if (!starting_) return;
  starting_ = false;
  problems_ = QStringList{"The sweep was not started:"} + message.split('\n');
  plan_ = {};
  planned_request_ = 0;
  showProblems();
}

QString SweepDesigner::saveTo(const QString& file) const {
  if (sweep_text_.isEmpty()) return "Fix the axes first:\n" + row_problems_.join("\n");
  std::ofstream out(file.toStdString());
  out << "# A Flotilla sweep (docs/sweeps.md): flotilla sweep "
      << QFileInfo(file).fileName().toStdString() << "\n"
      << config_document_to_yaml(sweep_text_.toStdString());
  out.close();
  if (!out) return "Cannot write " + file;
  return {};
}

void SweepDesigner::chooseFileToOpen() {
  const QString file =
      QFileDialog::getOpenFileName(this, "Open sweep", {}, "Sweeps (*.yaml *.yml *.json)");
  if (!file.isEmpty()) openFile(file);
}

void SweepDesigner::chooseFileToSave() {
  const QString file =
      QFileDialog::getSaveFileName(this, "Save sweep", name_->text() + ".yaml", "YAML (*.yaml)");
  if (file.isEmpty()) return;
  if (const QString error = saveTo(file); !error.isEmpty()) {
    problems_ = QStringList{error};
    problems_label_->setText(error);
    problems_label_->setVisible(true);
  }
}

}  // namespace flotilla::gui
