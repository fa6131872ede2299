#pragma once
// Edits an experiment: the keys the engine runs today as widgets, every other
// key kept as loaded. Each edit revalidates with the same parser the CLI and
// engine use, and shows its messages under the form.

#include <QStringList>
#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace flotilla::gui {

class ExperimentForm : public QWidget {
  Q_OBJECT
 public:
  explicit ExperimentForm(QWidget* parent = nullptr);

  void setConfigJson(const QString& config_json);
  // The form as an experiment in JSON (valid or not) and what is wrong with it.
  QString configJson() const { return json_; }
  QStringList problems() const { return problems_; }
  QString name() const;

 signals:
  void edited();

 private:
  void revalidate();

  std::string base_json_;
  QString json_;
  QStringList problems_;
  bool loading_ = false;
  QLineEdit* nodes_ = nullptr;
  QLineEdit* name_;
  QComboBox *model_, *dataset_, *strategy_, *optimizer_, *device_;
  QSpinBox *ranks_, *batch_, *epochs_, *max_steps_, *threads_, *seed_;
  QDoubleSpinBox* lr_;
  QLabel* status_;
};

}  // namespace flotilla::gui
