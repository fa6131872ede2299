#include "config_diff.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include <map>
#include <nlohmann/json.hpp>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla::gui {
namespace {

using nlohmann::json;

void flatten(const json& value, const std::string& prefix, std::map<std::string, json>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, inner] : value.items())
      flatten(inner, prefix.empty() ? key : prefix + "." + key, out);
    return;
  }
  out[prefix] = value;
}

// Every key of a stored config with its value as the validator reads it
// (defaults filled in); a config the validator refuses is shown as written.
std::map<std::string, json> flat_config(const QString& config_json) {
  const json raw = json::parse(config_json.toStdString(), nullptr, false);
  std::map<std::string, json> out;
  if (!raw.is_object()) return out;
  std::vector<std::string> problems;
  const auto config = read_experiment(raw.dump(), "config", problems);
  flatten(problems.empty() ? json::parse(to_json(config)) : raw, "", out);
  return out;
}

QString shown(const json& value) {
  if (value.is_string()) return QString::fromStdString(value.get<std::string>());
  if (value.is_null()) return "null";
  return QString::fromStdString(value.dump());
}

}  // namespace

QVector<ConfigDifference> config_differences(const QString& left_json, const QString& right_json) {
  const auto left = flat_config(left_json);
  const auto right = flat_config(right_json);
  std::map<std::string, std::pair<QString, QString>> keys;
  for (const auto& [key, value] : left) keys[key].first = shown(value);
  for (const auto& [key, value] : right) keys[key].second = shown(value);
  QVector<ConfigDifference> out;
  for (const auto& [key, values] : keys) {
    const bool in_left = left.count(key) > 0, in_right = right.count(key) > 0;
    if (in_left && in_right && left.at(key) == right.at(key)) continue;
    out.push_back({QString::fromStdString(key), in_left ? values.first : QString("—"),
                   in_right ? values.second : QString("—")});
  }
  return out;
}

ConfigDiffDialog::ConfigDiffDialog(const QVector<ConfigSource>& sources, QWidget* parent)
    : QDialog(parent), sources_(sources) {
  setWindowTitle("Compare experiment configs");
  left_ = new QComboBox;
  left_->setObjectName("diffLeft");
  right_ = new QComboBox;
  right_->setObjectName("diffRight");
  for (const auto& s : sources) {
    left_->addItem(s.label);
    right_->addItem(s.label);
  }
  if (sources.size() > 1) right_->setCurrentIndex(1);
  summary_ = new QLabel;
  summary_->setObjectName("diffSummary");
  table_ = new QTableWidget(0, 3);
  table_->setObjectName("diffTable");
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  auto* form = new QFormLayout;
  form->addRow("Left:", left_);
  form->addRow("Right:", right_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(summary_);
  layout->addWidget(table_, 1);
  layout->addWidget(buttons);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(left_, &QComboBox::currentIndexChanged, this, &ConfigDiffDialog::compare);
  connect(right_, &QComboBox::currentIndexChanged, this, &ConfigDiffDialog::compare);
  resize(760, 480);
  compare();
}

bool ConfigDiffDialog::choose(const QString& left, const QString& right) {
  const int l = left_->findText(left), r = right_->findText(right);
  if (l < 0 || r < 0) return false;
  left_->setCurrentIndex(l);
  right_->setCurrentIndex(r);
  compare();
  return true;
}

void ConfigDiffDialog::compare() {
  const int l = left_->currentIndex(), r = right_->currentIndex();
  table_->setRowCount(0);
  if (l < 0 || r < 0) {
    summary_->setText("Nothing to compare yet: save an experiment or start a run.");
    return;
  }
  table_->setHorizontalHeaderLabels({"Key", left_->currentText(), right_->currentText()});
  const auto differences = config_differences(sources_[l].config_json, sources_[r].config_json);
  table_->setRowCount(int(differences.size()));
  for (int row = 0; row < differences.size(); ++row) {
    const auto& d = differences[row];
    const QStringList cells{d.key, d.left, d.right};
    for (int column = 0; column < 3; ++column) {
      auto* item = new QTableWidgetItem(cells[column]);
      item->setToolTip(cells[column]);
      table_->setItem(row, column, item);
    }
  }
  summary_->setText(differences.isEmpty()
                        ? QString("The two configs are the same.")
                        : QString::number(differences.size()) +
                              (differences.size() == 1 ? " key differs." : " keys differ."));
}

}  // namespace flotilla::gui
