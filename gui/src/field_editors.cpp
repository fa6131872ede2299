#include "field_editors.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLineEdit>
#include <QMenu>
#include <QPushButton>
#include <QStyle>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include <charconv>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/numbers.h"

namespace flotilla::gui {
namespace {

using nlohmann::json;

QString object_name(const ConfigKey& key) {
  return "key:" + QString::fromStdString(key.key);
}

// A whole integer in the C locale, or nothing.
std::optional<json> integer_of(const std::string& text, bool is_unsigned) {
  const char* end = text.data() + text.size();
  if (is_unsigned) {
    uint64_t u = 0;
    if (auto [p, ec] = std::from_chars(text.data(), end, u); ec == std::errc() && p == end)
      return json(u);
  }
  int64_t i = 0;
  if (auto [p, ec] = std::from_chars(text.data(), end, i); ec == std::errc() && p == end)
    return json(i);
  return std::nullopt;
}

// What a person typed for one number: a number when it reads as one, the
// text itself otherwise, so that the parser says "expected an integer, got
// \"12a\"" at the field.
json number_of(const std::string& text, bool integer, bool is_unsigned) {
  if (integer)
    if (auto i = integer_of(text, is_unsigned)) return *i;
  if (auto d = parse_number(text)) return *d;
  return text;
}

class LineEditor : public FieldEditor {
 public:
  explicit LineEditor(const ConfigKey& key) : FieldEditor(key), edit_(new QLineEdit) {
    edit_->setObjectName(object_name(key));
    if (!key.default_text.empty())
      edit_->setPlaceholderText(QString::fromStdString(key.default_text) + " (default)");
    connect(edit_, &QLineEdit::textChanged, this, [this] {
      if (!loading_) emit edited();
    });
  }
  QWidget* widget() const override { return edit_; }
  QWidget* input() const override { return edit_; }
  void load(const json& value) override {
    loading_ = true;
    edit_->setText(value.is_null() ? QString() : text_of_value(value));
    loading_ = false;
  }
  std::optional<json> value() const override { return value_of_text(key_.type, edit_->text()); }

 private:
  QLineEdit* edit_;
};

class ChoiceEditor : public FieldEditor {
 public:
  explicit ChoiceEditor(const ConfigKey& key) : FieldEditor(key), combo_(new QComboBox) {
    combo_->setObjectName(object_name(key));
    for (const auto& choice : key.choices) combo_->addItem(QString::fromStdString(choice));
    connect(combo_, &QComboBox::currentTextChanged, this, [this] {
      if (!loading_) emit edited();
    });
  }
  QWidget* widget() const override { return combo_; }
  QWidget* input() const override { return combo_; }
  void load(const json& value) override {
    loading_ = true;
    // A value the table does not allow stays visible as it was written, for
    // the validator's message beside it.
    for (int i = combo_->count() - 1; i >= int(key_.choices.size()); --i) combo_->removeItem(i);
    const QString text =
        value.is_null() ? QString::fromStdString(key_.default_text) : text_of_value(value);
    if (combo_->findText(text) < 0) combo_->addItem(text);
    combo_->setCurrentText(text);
    loading_ = false;
  }
  std::optional<json> value() const override { return json(combo_->currentText().toStdString()); }

 protected:
  QComboBox* combo_;
};

class BoolEditor : public FieldEditor {
 public:
  explicit BoolEditor(const ConfigKey& key) : FieldEditor(key), box_(new QCheckBox) {
    box_->setObjectName(object_name(key));
    connect(box_, &QCheckBox::toggled, this, [this] {
      if (!loading_) emit edited();
    });
  }
  QWidget* widget() const override { return box_; }
  QWidget* input() const override { return box_; }
  void load(const json& value) override {
    loading_ = true;
    box_->setChecked(value.is_boolean() ? value.get<bool>() : key_.default_text == "true");
    loading_ = false;
  }
  std::optional<json> value() const override { return json(box_->isChecked()); }

 private:
  QCheckBox* box_;
};

// A list of mappings (freeze.schedule) as a table: a column per field, a row
// per entry, with buttons to add and remove entries.
class MappingListEditor : public FieldEditor {
 public:
  explicit MappingListEditor(const ConfigKey& key)
      : FieldEditor(key), box_(new QWidget), table_(new QTableWidget) {
    for (const auto& row : config_keys())
      if (row.is_list_field() && row.list_key() == key.key) fields_.push_back(&row);
    table_->setObjectName(object_name(key));
    table_->setColumnCount(int(fields_.size()));
    for (int c = 0; c < int(fields_.size()); ++c) {
      const std::string& dotted = fields_[c]->key;
      auto* header =
          new QTableWidgetItem(QString::fromStdString(dotted.substr(dotted.rfind('.') + 1)));
      header->setToolTip(QString::fromStdString(fields_[c]->description));
      table_->setHorizontalHeaderItem(c, header);
    }
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    table_->setMaximumHeight(120);
    auto* add = new QPushButton("Add entry");
    add->setObjectName(object_name(key) + ":add");
    auto* remove = new QPushButton("Remove entry");
    remove->setObjectName(object_name(key) + ":remove");
    auto* buttons = new QVBoxLayout;
    buttons->addWidget(add);
    buttons->addWidget(remove);
    buttons->addStretch();
    auto* layout = new QHBoxLayout(box_);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(table_, 1);
    layout->addLayout(buttons);
    connect(table_, &QTableWidget::itemChanged, this, [this] {
      if (!loading_) emit edited();
    });
    connect(add, &QPushButton::clicked, this, [this] {
      loading_ = true;
      table_->insertRow(table_->rowCount());
      for (int c = 0; c < table_->columnCount(); ++c)
        table_->setItem(table_->rowCount() - 1, c, new QTableWidgetItem("0"));
      loading_ = false;
      emit edited();
    });
    connect(remove, &QPushButton::clicked, this, [this] {
      const int row = table_->currentRow() >= 0 ? table_->currentRow() : table_->rowCount() - 1;
      if (row < 0) return;
      table_->removeRow(row);
      emit edited();
    });
  }
  QWidget* widget() const override { return box_; }
  QWidget* input() const override { return table_; }
  void load(const json& value) override {
    loading_ = true;
    table_->setRowCount(0);
    if (value.is_array()) {
      for (const auto& entry : value) {
        const int row = table_->rowCount();
        table_->insertRow(row);
        for (int c = 0; c < int(fields_.size()); ++c) {
          const std::string& dotted = fields_[c]->key;
          const std::string field = dotted.substr(dotted.rfind('.') + 1);
          const json cell = entry.is_object() && entry.contains(field) ? entry[field] : json();
          table_->setItem(row, c, new QTableWidgetItem(text_of_value(cell)));
        }
      }
    }
    loading_ = false;
  }
  std::optional<json> value() const override {
    json list = json::array();
    for (int r = 0; r < table_->rowCount(); ++r) {
      json entry = json::object();
      for (int c = 0; c < int(fields_.size()); ++c) {
        const std::string& dotted = fields_[c]->key;
        const auto* item = table_->item(r, c);
        const auto cell = value_of_text(fields_[c]->type, item ? item->text() : QString());
        if (cell) entry[dotted.substr(dotted.rfind('.') + 1)] = *cell;
      }
      list.push_back(entry);
    }
    return list;
  }

 private:
  QWidget* box_;
  QTableWidget* table_;
  std::vector<const ConfigKey*> fields_;
};

}  // namespace

void FieldEditor::setMarked(bool problem, bool current) {
  current_ = problem && current;
  QWidget* w = input();
  w->setProperty("problem", problem);
  w->setProperty("marked", current_);
  // The outline says "this field"; the clicked one also gets a tint.
  const QString outline = current_  ? "border: 2px solid #c62828; background: #fff3f3;"
                          : problem ? "border: 1px solid #c62828;"
                                    : "";
  const QString type = w->metaObject()->className();
  w->setStyleSheet(outline.isEmpty() ? QString() : type + " { " + outline + " }");
}

std::optional<json> value_of_text(ConfigKeyType type, const QString& typed) {
  const std::string text = typed.trimmed().toStdString();
  switch (type) {
    case ConfigKeyType::text:
      return json(typed.toStdString());
    case ConfigKeyType::integer:
    case ConfigKeyType::unsigned_integer:
    case ConfigKeyType::number:
      if (text.empty()) return std::nullopt;
      return number_of(text, type != ConfigKeyType::number,
                       type == ConfigKeyType::unsigned_integer);
    case ConfigKeyType::integer_list: {
      // "3, 7" or "[3, 7]": a list when every entry is an integer, else the text.
      std::string inner = text;
      if (inner.size() >= 2 && inner.front() == '[' && inner.back() == ']')
        inner = inner.substr(1, inner.size() - 2);
      json list = json::array();
      for (const auto& entry : split_list(inner)) {
        const auto i = integer_of(entry, false);
        if (!i) return json(text);
        list.push_back(*i);
      }
      return list;
    }
    case ConfigKeyType::name_list: {
      json list = json::array();
      for (const auto& entry : split_list(text)) list.push_back(entry);
      return list;
    }
    case ConfigKeyType::boolean:
    case ConfigKeyType::choice:
    case ConfigKeyType::mapping_list:
      break;
  }
  return json(typed.toStdString());
}

QString text_of_value(const json& value) {
  if (value.is_null()) return {};
  if (value.is_string()) return QString::fromStdString(value.get<std::string>());
  if (value.is_number_float()) return QString::fromStdString(format_number(value.get<double>()));
  if (value.is_array()) {
    QStringList parts;
    for (const auto& item : value) parts << text_of_value(item);
    return parts.join(", ");
  }
  return QString::fromStdString(value.dump());  // integers, booleans: locale-free already
}

NodesEditor::NodesEditor(const ConfigKey& key)
    : FieldEditor(key), box_(new QWidget), edit_(new QLineEdit), picker_(new QToolButton) {
  edit_->setObjectName(object_name(key));
  edit_->setPlaceholderText("local, or nodes of the Nodes tab, comma-separated");
  picker_->setObjectName("nodePicker");
  picker_->setText("Pick…");
  picker_->setToolTip("Choose among the stored nodes; each shows its GPUs");
  picker_->setPopupMode(QToolButton::InstantPopup);
  picker_->setMenu(new QMenu(picker_));
  auto* layout = new QHBoxLayout(box_);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(edit_, 1);
  layout->addWidget(picker_);
  connect(edit_, &QLineEdit::textChanged, this, [this] {
    syncChecks();
    if (!loading_) emit edited();
  });
  rebuildMenu();
}

QStringList NodesEditor::chosen() const {
  QStringList names;
  for (const auto& n : split_list(edit_->text().toStdString())) names << QString::fromStdString(n);
  return names;
}

void NodesEditor::syncChecks() {
  // Not a rebuild: this runs inside a picked action's own signal.
  const QStringList names = chosen();
  for (QAction* action : picker_->menu()->actions()) {
    if (!action->isCheckable()) continue;
    QSignalBlocker block(action);
    action->setChecked(names.contains(action->data().toString()));
  }
}

QWidget* NodesEditor::input() const {
  return edit_;
}

void NodesEditor::load(const json& value) {
  loading_ = true;
  edit_->setText(value.is_null() ? QString() : text_of_value(value));
  loading_ = false;
}

std::optional<json> NodesEditor::value() const {
  return value_of_text(key_.type, edit_->text());
}

void NodesEditor::setChoices(const QVector<NodeChoice>& nodes) {
  if (nodes.size() == choices_.size() &&
      std::equal(nodes.begin(), nodes.end(), choices_.begin(), [](const auto& a, const auto& b) {
        return a.name == b.name && a.description == b.description;
      }))
    return;
  choices_ = nodes;
  rebuildMenu();
}

void NodesEditor::rebuildMenu() {
  QMenu* menu = picker_->menu();
  menu->clear();
  if (choices_.isEmpty()) menu->addAction("No nodes stored yet (Nodes tab)")->setEnabled(false);
  for (const auto& node : choices_) {
    QAction* action = menu->addAction(node.name + "  —  " + node.description);
    action->setObjectName("pick:" + node.name);
    action->setData(node.name);
    action->setCheckable(true);
    connect(action, &QAction::toggled, this, [this, name = node.name](bool on) {
      QStringList names = chosen();
      names.removeAll(name);
      if (on) names << name;
      // The window's own node cannot share a run; picking a remote one drops it.
      if (on && name != "local") names.removeAll("local");
      if (on && name == "local") names = QStringList{"local"};
      edit_->setText(names.join(", "));
    });
  }
  syncChecks();
}

std::unique_ptr<FieldEditor> make_field_editor(const ConfigKey& key) {
  switch (key.type) {
    case ConfigKeyType::choice:
      return std::make_unique<ChoiceEditor>(key);
    case ConfigKeyType::boolean:
      return std::make_unique<BoolEditor>(key);
    case ConfigKeyType::mapping_list:
      return std::make_unique<MappingListEditor>(key);
    case ConfigKeyType::name_list:
      return std::make_unique<NodesEditor>(key);
    case ConfigKeyType::text:
    case ConfigKeyType::integer:
    case ConfigKeyType::unsigned_integer:
    case ConfigKeyType::number:
    case ConfigKeyType::integer_list:
      break;
  }
  return std::make_unique<LineEditor>(key);
}

}  // namespace flotilla::gui
