#pragma once
// Adding or editing a node: each field refuses what `flotilla nodes add`
// refuses (the controller's validate_node), with its words under the field,
// and OK stays disabled until nothing is wrong. Editing keeps the name.

#include <QCheckBox>
#include <QDialog>
#include <QMap>

#include "controller_worker.h"

class QDialogButtonBox;
class QLabel;
class QLineEdit;

namespace flotilla::gui {

class NodeDialog : public QDialog {
  Q_OBJECT
 public:
  // `existing`: the node being edited; nothing to add a new one.
  explicit NodeDialog(const std::optional<NodeItem>& existing, QWidget* parent = nullptr);

  NodeItem node() const;
  QStringList problems() const { return problems_; }
  QLineEdit* field(const QString& name) const { return fields_.value(name); }
  QString messageAt(const QString& name) const;

 private:
  void revalidate();

  QMap<QString, QLineEdit*> fields_;  // by validate_node's field names
  QCheckBox* slurm_ = nullptr;
  QMap<QString, QLabel*> messages_;
  QDialogButtonBox* buttons_;
  QStringList problems_;
};

}  // namespace flotilla::gui
