#pragma once
// The designer's form: every key of the protocol's key table as a field,
// grouped as the table groups them, each labelled with its dotted key (the
// YAML's and the messages' name for it) and a tool tip from its description.
// A row shows only while its key applies to the config (or has a problem),
// a group only while one of its rows shows; each problem is written under
// its field.

#include <QMap>
#include <QStringList>
#include <QWidget>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "field_editors.h"
#include "flotilla/protocol/config_keys.h"

class QGridLayout;
class QGroupBox;
class QLabel;

namespace flotilla::gui {

class DesignerForm : public QWidget {
  Q_OBJECT
 public:
  explicit DesignerForm(QWidget* parent = nullptr);
  ~DesignerForm() override;

  // Shows `document` (a JSON object, valid or not) in every field; emits nothing.
  void load(const nlohmann::json& document);
  // Writes each problem under its field (by the dotted key it starts with)
  // and shows the rows and groups that apply to `config`.
  void showState(const QStringList& problems, const ExperimentConfig& config);
  // The field that shows messages about `key` ("freeze.schedule[1].blocks"
  // is the freeze.schedule table's); null when none does.
  FieldEditor* editorFor(const std::string& key) const;
  // Gives that field focus and marks it as the problem being looked at.
  bool focusKey(const std::string& key);
  NodesEditor* nodesEditor() const { return nodes_; }
  QGroupBox* groupBox(ConfigGroup group) const { return groups_.at(group).box; }
  bool rowShown(const std::string& key) const;
  // The messages written under `key`'s field.
  QString messagesAt(const std::string& key) const;

 signals:
  // A person edited a field: its key and new value (nothing: leave the key out).
  void fieldEdited(const std::string& key, const std::optional<nlohmann::json>& value);

 private:
  struct Row {
    std::unique_ptr<FieldEditor> editor;
    QLabel* message = nullptr;
    QLabel* label = nullptr;
    QGridLayout* layout = nullptr;
    QWidget* field = nullptr;
  };
  struct Group {
    QGroupBox* box = nullptr;
    QGridLayout* layout = nullptr;
  };
  std::map<ConfigGroup, Group> groups_;
  std::map<std::string, Row>
      rows_;  // by key; list fields have none (their list's table shows them)
  NodesEditor* nodes_ = nullptr;
};

}  // namespace flotilla::gui
