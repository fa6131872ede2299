#pragma once
// One editor per config key, chosen by the key's type in the protocol's key
// table: it shows the value a document holds at the key and hands back what
// the person typed, however wrong, so that the validator (not the widget)
// decides and says what is wrong. Numbers are read and shown in the C locale,
// the digits of the YAML.

#include <QObject>
#include <QString>
#include <QStringList>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "flotilla/protocol/config_keys.h"

class QComboBox;
class QLineEdit;
class QTableWidget;
class QToolButton;
class QWidget;

namespace flotilla::gui {

class FieldEditor : public QObject {
  Q_OBJECT
 public:
  explicit FieldEditor(const ConfigKey& key) : key_(key) {}
  const ConfigKey& key() const { return key_; }
  // What the form lays out (the editor, or the editor with its buttons).
  virtual QWidget* widget() const = 0;
  // What gets focus when a message about the key is clicked; its object name
  // is "key:" and the dotted key.
  virtual QWidget* input() const = 0;
  // Shows `value`; null when the document leaves the key out (the default).
  virtual void load(const nlohmann::json& value) = 0;
  // The value to store; nothing: leave the key out, so the default applies.
  virtual std::optional<nlohmann::json> value() const = 0;
  // Outlines the input while the key has a problem; `current`: the problem a
  // person clicked, drawn stronger.
  void setMarked(bool problem, bool current);
  bool marked() const { return current_; }

 signals:
  // A person changed the value (loading a document does not count).
  void edited();

 protected:
  const ConfigKey& key_;
  bool loading_ = false;

 private:
  bool current_ = false;
};

// The editor for `key`, by its type.
std::unique_ptr<FieldEditor> make_field_editor(const ConfigKey& key);

// The value of what a person typed for a number or list key: a number when
// the text is one (C locale), the text itself otherwise (for the validator to
// name), nothing for an empty optional field.
std::optional<nlohmann::json> value_of_text(ConfigKeyType type, const QString& text);
// The text a field shows for `value`.
QString text_of_value(const nlohmann::json& value);

struct NodeChoice {
  QString name;
  QString description;  // "2 GPUs (NVIDIA A100, 40.0 GiB)", "not probed"
};

// The nodes field: names typed comma-separated, or picked from a menu of the
// stored nodes, each listed with its GPUs.
class NodesEditor : public FieldEditor {
  Q_OBJECT
 public:
  explicit NodesEditor(const ConfigKey& key);
  QWidget* widget() const override { return box_; }
  QWidget* input() const override;
  void load(const nlohmann::json& value) override;
  std::optional<nlohmann::json> value() const override;
  void setChoices(const QVector<NodeChoice>& nodes);
  QToolButton* picker() const { return picker_; }
  QStringList chosen() const;

 private:
  void rebuildMenu();
  void syncChecks();

  QWidget* box_;
  QLineEdit* edit_;
  QToolButton* picker_;
  QVector<NodeChoice> choices_;
};

}  // namespace flotilla::gui
