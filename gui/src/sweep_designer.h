#pragma once
// "New sweep…": a sweep designed in the window. It starts from the
// experiment in the Experiment tab (or a sweep file, or one of the seed
// studies the controller carries); each axis is a row (a config key, its
// values as a comma list, `until: oom`), with `repeat` below. As the person
// types, the sweep is planned on the controller's worker (planRequested,
// answered by showPlan: the code of `flotilla sweep --dry-run`): the number
// of runs and every refused point with the validator's words. Start hands
// the sweep to the worker (startRequested); nothing here touches SQL or an
// agent. Save as / Open read and write the sweep file (docs/sweeps.md).

#include <QDialog>
#include <QString>
#include <QStringList>

#include <nlohmann/json.hpp>

#include "controller_worker.h"  // SweepPlanItem
#include "flotilla/protocol/sweep.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTimer;
class QToolButton;

namespace flotilla::gui {

class SweepDesigner : public QDialog {
  Q_OBJECT
 public:
  explicit SweepDesigner(QWidget* parent = nullptr);

  // Columns of the axes table.
  enum AxisColumn { kKeyColumn = 0, kValuesColumn = 1, kUntilColumn = 2 };

  // A new sweep over `config_json` (the Experiment tab's), named
  // "<experiment>-sweep", with one empty axis to fill in.
  void startFrom(const QString& config_json);
  // Loads a sweep file (YAML or JSON); false, with every problem shown, when
  // it cannot be read.
  bool openFile(const QString& file);
  // Loads study `name` at `scale` as the controller carries it.
  bool openStudy(const QString& name, const QString& scale);
  // Writes the sweep as YAML; an error message, empty on success.
  QString saveTo(const QString& file) const;

  // Rows of the table; values as typed ("32, 64, 128").
  int addAxis(const QString& key = {}, const QString& values = {}, bool until_oom = false);
  void removeAxis(int row);
  void setAxisKey(int row, const QString& key);
  void setAxisValues(int row, const QString& values);
  void setAxisUntilOom(int row, bool until_oom);
  void setRepeat(int repeat);
  void setSweepName(const QString& name);

  // The sweep as it would be stored (JSON text); empty while a row is wrong.
  QString sweepText() const { return sweep_text_; }
  // Problems shown now: the rows' own and the plan's, each naming its key.
  QStringList problems() const { return problems_; }
  const SweepPlanItem& plan() const { return plan_; }
  // Whether the plan shown is the one of what the form says now.
  bool planCurrent() const;
  // Whether what is shown is about the form as it is now: no edit waits to
  // be planned, and the plan asked for (if any) has come back.
  bool settled() const;

  QTableWidget* axesTable() const { return axes_; }
  QTableWidget* refusedTable() const { return refused_; }
  QLabel* runCountLabel() const { return run_count_; }
  QLabel* problemsLabel() const { return problems_label_; }
  QPushButton* startButton() const { return start_; }

 public slots:
  // The worker's answer to planRequested; an older request's is dropped.
  void showPlan(const flotilla::gui::SweepPlanItem& plan, quint64 request);
  void sweepStarted(const QString& sweep);
  void sweepRefused(const QString& message);

 signals:
  void planRequested(const QString& sweep_text, quint64 request);
  void startRequested(const QString& sweep_text, const QString& source);
  // The worker stored the sweep and runs it.
  void started(const QString& sweep);

 private:
  void buildWidgets();
  // Fills the form from a parsed sweep (its base inline).
  void load(const SweepSpec& spec, const QString& source);
  QComboBox* keyBox(int row) const;
  QLineEdit* valuesEdit(int row) const;
  QCheckBox* untilBox(int row) const;
  // Builds the sweep from the form (rows' problems into problems_) and asks
  // the worker for its plan; called a moment after the last edit.
  void replan();
  nlohmann::ordered_json document(QStringList* problems) const;
  void showProblems();
  void updateStart();
  void chooseFileToOpen();
  void chooseFileToSave();

  // The parts of the sweep the rows do not edit: description, base, report.
  nlohmann::ordered_json rest_ = nlohmann::ordered_json::object();
  QString source_ = "window";  // the file or study it came from, stored with it
  QString sweep_text_;
  QStringList row_problems_, problems_;
  SweepPlanItem plan_;
  quint64 request_ = 0, planned_request_ = 0;
  bool starting_ = false;
  QTimer* replan_timer_;
  QLineEdit* name_;
  QLabel* base_;
  QSpinBox* repeat_;
  QTableWidget* axes_;
  QPushButton *add_axis_, *remove_axis_;
  QLabel *run_count_, *problems_label_;
  QTableWidget* refused_;
  QPushButton *open_, *save_, *start_;
  QToolButton* studies_;
};

}  // namespace flotilla::gui
