#include "designer_form.h"

#include <QGridLayout>
#include <QGroupBox>
#include <QLabel>
#include <QVBoxLayout>

#include <algorithm>

namespace flotilla::gui {
namespace {

using nlohmann::json;

const json* value_at(const json& document, const std::string& key) {
  const json* node = &document;
  size_t start = 0;
  while (start <= key.size()) {
    const size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return node;
}

QString tool_tip(const ConfigKey& key) {
  QString tip = "<b>" + QString::fromStdString(key.key) + "</b><br>" +
                QString::fromStdString(key.description).toHtmlEscaped() +
                "<br><br>Allowed: " + QString::fromStdString(key.allowed).toHtmlEscaped();
  if (!key.default_text.empty())
    tip += "<br>Default: " + QString::fromStdString(key.default_text).toHtmlEscaped();
  if (!key.applies_when.empty())
    tip += "<br>Applies with " + QString::fromStdString(key.applies_when).toHtmlEscaped();
  return tip;
}

}  // namespace

DesignerForm::DesignerForm(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  for (ConfigGroup g : config_groups()) {
    Group group;
    group.box = new QGroupBox(QString::fromUtf8(name_of(g).data(), int(name_of(g).size())));
    group.box->setObjectName("group:" + group.box->title());
    // A grid, not a QFormLayout: Qt 6.4's QFormLayout writes past its row
    // table when rows are hidden (seen under valgrind), and rows hide here.
    group.layout = new QGridLayout(group.box);
    group.layout->setColumnStretch(1, 1);
    layout->addWidget(group.box);
    groups_[g] = group;
  }
  layout->addStretch();
  for (const auto& key : config_keys()) {
    if (key.is_list_field()) continue;
    Row row;
    row.editor = make_field_editor(key);
    row.layout = groups_[key.group].layout;
    row.field = new QWidget;
    auto* field_layout = new QVBoxLayout(row.field);
    field_layout->setContentsMargins(0, 0, 0, 0);
    field_layout->setSpacing(2);
    field_layout->addWidget(row.editor->widget());
    row.message = new QLabel;
    row.message->setObjectName("problem:" + QString::fromStdString(key.key));
    row.message->setWordWrap(true);
    row.message->setStyleSheet("color: #c62828;");
    row.message->hide();
    field_layout->addWidget(row.message);
    auto* label = new QLabel(QString::fromStdString(key.key));
    label->setToolTip(tool_tip(key));
    label->setBuddy(row.editor->input());
    row.editor->input()->setToolTip(tool_tip(key));
    const int at = row.layout->rowCount();
    row.layout->addWidget(label, at, 0, Qt::AlignTop | Qt::AlignLeft);
    row.layout->addWidget(row.field, at, 1);
    row.label = label;
    if (auto* nodes = dynamic_cast<NodesEditor*>(row.editor.get())) nodes_ = nodes;
    connect(row.editor.get(), &FieldEditor::edited, this, [this, editor = row.editor.get()] {
      emit fieldEdited(editor->key().key, editor->value());
    });
    rows_.emplace(key.key, std::move(row));
  }
  // One label column for every group, so that the fields line up down the form.
  int label_width = 0;
  for (const auto& [key, row] : rows_)
    label_width = std::max(label_width, row.label->sizeHint().width());
  for (auto& [g, group] : groups_) group.layout->setColumnMinimumWidth(0, label_width);
}

DesignerForm::~DesignerForm() = default;

void DesignerForm::load(const json& document) {
  for (auto& [key, row] : rows_) {
    const json* value = value_at(document, key);
    row.editor->load(value ? *value : json());
  }
}

FieldEditor* DesignerForm::editorFor(const std::string& key) const {
  const ConfigKey* row = find_config_key(key);
  if (!row) return nullptr;
  const auto it = rows_.find(row->list_key());
  return it == rows_.end() ? nullptr : it->second.editor.get();
}

void DesignerForm::showState(const QStringList& problems, const ExperimentConfig& config) {
  std::map<std::string, QStringList> at;
  for (const auto& p : problems) {
    const std::string key = key_of_message(p.toStdString());
    if (const auto* editor = editorFor(key)) at[editor->key().key] << p;
  }
  std::map<ConfigGroup, bool> group_shown;
  for (auto& [key, row] : rows_) {
    const auto found = at.find(key);
    const bool problem = found != at.end();
    row.message->setText(problem ? found->second.join("\n") : QString());
    row.message->setVisible(problem);
    row.editor->setMarked(problem, problem && row.editor->marked());
    // A key that does not apply is hidden, unless it is what is wrong.
    const bool shown = problem || key_applies(row.editor->key(), config);
    row.label->setVisible(shown);
    row.field->setVisible(shown);
    group_shown[row.editor->key().group] |= shown;
  }
  for (auto& [g, group] : groups_) group.box->setVisible(group_shown[g]);
}

bool DesignerForm::focusKey(const std::string& key) {
  FieldEditor* target = editorFor(key);
  if (!target) return false;
  for (auto& [k, row] : rows_)
    if (row.editor.get() != target) row.editor->setMarked(row.message->isVisible(), false);
  target->setMarked(true, true);
  target->input()->setFocus(Qt::OtherFocusReason);
  return true;
}

bool DesignerForm::rowShown(const std::string& key) const {
  const auto it = rows_.find(key);
  return it != rows_.end() && it->second.field->isVisibleTo(this) &&
         groups_.at(it->second.editor->key().group).box->isVisibleTo(this);
}

QString DesignerForm::messagesAt(const std::string& key) const {
  const auto it = rows_.find(key);
  return it == rows_.end() || !it->second.message->isVisibleTo(this) ? QString()
                                                                     : it->second.message->text();
}

}  // namespace flotilla::gui
