#pragma once
// Two experiments' (or runs') configs side by side, only the keys that
// differ: the "what did I change between these two" of the seed studies'
// hand-made tables. Each config is read as the validator reads it, so a key
// left out and the same key written with its default do not differ.

#include <QDialog>
#include <QString>
#include <QVector>

class QComboBox;
class QLabel;
class QTableWidget;

namespace flotilla::gui {

struct ConfigDifference {
  QString key;          // dotted: "optimizer.lr"
  QString left, right;  // the value as YAML would write it; "—" when absent
};

// The keys whose values differ between two stored configs (JSON), in key order.
QVector<ConfigDifference> config_differences(const QString& left_json, const QString& right_json);

// A config the dialog can compare: "experiment NAME" or "run ID".
struct ConfigSource {
  QString label;
  QString config_json;
};

class ConfigDiffDialog : public QDialog {
  Q_OBJECT
 public:
  ConfigDiffDialog(const QVector<ConfigSource>& sources, QWidget* parent = nullptr);
  // Chooses the two sides by label; false when one is not offered.
  bool choose(const QString& left, const QString& right);
  QTableWidget* table() const { return table_; }

 private:
  void compare();

  QVector<ConfigSource> sources_;
  QComboBox *left_, *right_;
  QLabel* summary_;
  QTableWidget* table_;
};

}  // namespace flotilla::gui
