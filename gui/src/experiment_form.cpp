#include "experiment_form.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QSpinBox>

#include <nlohmann/json.hpp>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla::gui {
namespace {

using nlohmann::json;

template <typename Enum>
QComboBox* combo_of(std::initializer_list<Enum> values, const char* object_name) {
  auto* combo = new QComboBox;
  combo->setObjectName(object_name);
  for (Enum v : values) {
    const auto name = flotilla::name_of(v);
    combo->addItem(QString::fromUtf8(name.data(), int(name.size())));
  }
  return combo;
}

QSpinBox* spin(int low, int high, const char* object_name) {
  auto* box = new QSpinBox;
  box->setRange(low, high);
  box->setObjectName(object_name);
  return box;
}

}  // namespace

ExperimentForm::ExperimentForm(QWidget* parent) : QWidget(parent) {
  using M = ModelKind;
  using D = DatasetKind;
  using S = Strategy;
  name_ = new QLineEdit;
  name_->setObjectName("nameEdit");
  model_ = combo_of(
      {M::small_cnn, M::resnet18, M::mobilenet_v2, M::vgg13, M::vit, M::transformer_encoder},
      "modelCombo");
  dataset_ =
      combo_of({D::fashion_mnist, D::mnist, D::cifar10, D::cifar100, D::synthetic}, "datasetCombo");
  strategy_ = combo_of({S::single, S::dp, S::ddp, S::pipeline, S::pipeline_ddp}, "strategyCombo");
  optimizer_ = combo_of({OptimizerKind::sgd, OptimizerKind::adamw}, "optimizerCombo");
  device_ = combo_of({DeviceKind::cpu, DeviceKind::cuda}, "deviceCombo");
  nodes_ = new QLineEdit;
  nodes_->setObjectName("nodesEdit");
  nodes_->setPlaceholderText("local, or node names from `flotilla nodes add`, comma-separated");
  ranks_ = spin(1, 1024, "ranksSpin");
  batch_ = spin(1, 1 << 20, "batchSpin");
  epochs_ = spin(1, 100000, "epochsSpin");
  max_steps_ = spin(0, 1 << 30, "maxStepsSpin");
  max_steps_->setSpecialValueText("no limit");
  threads_ = spin(0, 1024, "threadsSpin");
  threads_->setSpecialValueText("LibTorch default");
  seed_ = spin(0, 1 << 30, "seedSpin");
  lr_ = new QDoubleSpinBox;
  lr_->setObjectName("lrSpin");
  lr_->setDecimals(5);
  lr_->setRange(0.00001, 10.0);
  lr_->setSingleStep(0.001);
  // The same digits as the YAML and the CLI, whatever the user's locale.
  lr_->setLocale(QLocale::c());
  status_ = new QLabel;
  status_->setObjectName("formStatus");
  status_->setWordWrap(true);

  auto* form = new QFormLayout(this);
  form->addRow("Name", name_);
  form->addRow("Model", model_);
  form->addRow("Data set", dataset_);
  form->addRow("Strategy", strategy_);
  form->addRow("Nodes", nodes_);
  form->addRow("Ranks per node", ranks_);
  form->addRow("Batch size (per rank)", batch_);
  form->addRow("Epochs", epochs_);
  form->addRow("Max steps", max_steps_);
  form->addRow("Optimizer", optimizer_);
  form->addRow("Learning rate", lr_);
  form->addRow("Device", device_);
  form->addRow("Threads", threads_);
  form->addRow("Seed", seed_);
  form->addRow(status_);

  for (auto* combo : {model_, dataset_, strategy_, optimizer_, device_})
    connect(combo, &QComboBox::currentTextChanged, this, &ExperimentForm::revalidate);
  for (auto* box : {ranks_, batch_, epochs_, max_steps_, threads_, seed_})
    connect(box, &QSpinBox::valueChanged, this, &ExperimentForm::revalidate);
  connect(lr_, &QDoubleSpinBox::valueChanged, this, &ExperimentForm::revalidate);
  connect(name_, &QLineEdit::textChanged, this, &ExperimentForm::revalidate);
  connect(nodes_, &QLineEdit::textChanged, this, &ExperimentForm::revalidate);

  setConfigJson(QString::fromStdString(to_json(ExperimentConfig())));
}

QString ExperimentForm::name() const {
  return name_->text();
}

void ExperimentForm::setConfigJson(const QString& config_json) {
  base_json_ = config_json.toStdString();
  const auto j = json::parse(base_json_, nullptr, false);
  if (!j.is_object()) {
    problems_ = {"the stored experiment is not a JSON object"};
    status_->setText(problems_.front());
    return;
  }
  loading_ = true;
  auto text = [&](const char* key, const std::string& fallback) {
    return QString::fromStdString(j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                        : fallback);
  };
  auto number = [&](const json& where, const char* key, double fallback) {
    return where.contains(key) && where[key].is_number() ? where[key].get<double>() : fallback;
  };
  const ExperimentConfig defaults;
  name_->setText(text("name", defaults.name));
  model_->setCurrentText(text("model", "small_cnn"));
  dataset_->setCurrentText(text("dataset", "fashion_mnist"));
  strategy_->setCurrentText(text("strategy", "single"));
  device_->setCurrentText(text("device", "cpu"));
  const json optimizer = j.contains("optimizer") ? j["optimizer"] : json::object();
  optimizer_->setCurrentText(QString::fromStdString(optimizer.value("name", "sgd")));
  lr_->setValue(number(optimizer, "lr", defaults.optimizer.lr));
  QStringList nodes;
  if (j.contains("nodes") && j["nodes"].is_array())
    for (const auto& n : j["nodes"])
      if (n.is_string()) nodes << QString::fromStdString(n.get<std::string>());
  nodes_->setText(nodes.isEmpty() ? "local" : nodes.join(", "));
  ranks_->setValue(int(number(j, "ranks_per_node", 1)));
  batch_->setValue(int(number(j, "batch_size", double(defaults.batch_size))));
  epochs_->setValue(int(number(j, "epochs", 1)));
  max_steps_->setValue(int(number(j, "max_steps", 0)));
  threads_->setValue(int(number(j, "threads", 0)));
  seed_->setValue(int(number(j, "seed", 0)));
  loading_ = false;
  revalidate();
}

void ExperimentForm::revalidate() {
  if (loading_) return;
  json j = json::parse(base_json_, nullptr, false);
  if (!j.is_object()) j = json::object();
  j["name"] = name_->text().toStdString();
  j["nodes"] = json::array();
  for (const auto& n : split_list(nodes_->text().toStdString())) j["nodes"].push_back(n);
  j["model"] = model_->currentText().toStdString();
  j["dataset"] = dataset_->currentText().toStdString();
  j["strategy"] = strategy_->currentText().toStdString();
  j["device"] = device_->currentText().toStdString();
  j["ranks_per_node"] = ranks_->value();
  j["batch_size"] = batch_->value();
  j["epochs"] = epochs_->value();
  j["max_steps"] = max_steps_->value();
  j["threads"] = threads_->value();
  j["seed"] = seed_->value();
  if (!j.contains("optimizer") || !j["optimizer"].is_object()) j["optimizer"] = json::object();
  j["optimizer"]["name"] = optimizer_->currentText().toStdString();
  j["optimizer"]["lr"] = lr_->value();
  json_ = QString::fromStdString(j.dump(2));
  problems_.clear();
  try {
    const auto config = parse_experiment(j.dump(), "form");
    for (const auto& missing : missing_data_files(config))
      problems_ << QString::fromStdString(missing);
  } catch (const ConfigError& e) {
    for (const auto& p : e.problems()) problems_ << QString::fromStdString(p);
  }
  if (problems_.isEmpty()) {
    status_->setStyleSheet("color: #2e7d32;");
    status_->setText("Ready to run.");
  } else {
    status_->setStyleSheet("color: #c62828;");
    status_->setText(problems_.join("\n"));
  }
  emit edited();
}

}  // namespace flotilla::gui
