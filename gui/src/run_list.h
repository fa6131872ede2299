#pragma once
// The run list under the experiments: every stored run, newest first, with
// filters (state, experiment, and text matched against the run, experiment,
// nodes and reason) and sorting by any column (a click on its header). The
// list only shows; the main window decides what a selection or a kill does.

#include <QByteArray>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include "controller_worker.h"

class QComboBox;
class QLineEdit;
class QTableWidget;

namespace flotilla::gui {

// A stored state of a run that has not ended (created, starting, queued,
// running), as the controller's state machine has it.
bool is_live_state(const QString& state);

class RunList : public QWidget {
  Q_OBJECT
 public:
  enum Column { kId, kState, kExperiment, kStarted, kRanks, kReason, kColumns };
  explicit RunList(QWidget* parent = nullptr);

  // The stored runs; the shown state of a run in `killing` is "killing…".
  void showRuns(const QVector<RunItem>& runs, const QSet<QString>& killing);
  // One run's new state (shown as "killing…" while `killing`); false when
  // the run is not listed.
  bool showState(const QString& run, const QString& state, const QString& reason,
                 bool killing = false);
  // Column widths and the sort as a person left them (QHeaderView::saveState);
  // from then on a refresh no longer fits the columns to their contents.
  void restoreColumns(const QByteArray& state);
  // Whether the widths are the person's (restored, or a header edge dragged):
  // only those are saved; widths fitted to the contents are not.
  bool columnsChosen() const { return columns_restored_; }
  const QVector<RunItem>& runs() const { return runs_; }
  // The run as listed; nullptr when it is not.
  const RunItem* run(const QString& id) const;

  void select(const QString& run);
  // The first selected run (empty when none); several can be selected at once.
  QString selected() const;
  // Every selected run, oldest first (the order a comparison lists them).
  QStringList selectedRuns() const;
  void selectRuns(const QStringList& runs);
  // The state the list shows for `run`, empty when it is not listed.
  QString listedState(const QString& run) const;
  // The runs the filters let through, top to bottom.
  QStringList shownRuns() const;

  QTableWidget* table() const { return table_; }
  QComboBox* stateFilter() const { return state_filter_; }
  QComboBox* experimentFilter() const { return experiment_filter_; }
  QLineEdit* textFilter() const { return text_filter_; }

 signals:
  void selectionChanged();

 private:
  int rowOf(const QString& run) const;
  void updateExperimentChoices();
  void applyFilters();

  QVector<RunItem> runs_;
  bool columns_restored_ = false;  // or set by the person: kept, never fitted again
  bool fitting_ = false;
  QTableWidget* table_;
  QComboBox* state_filter_;
  QComboBox* experiment_filter_;
  QLineEdit* text_filter_;
};

}  // namespace flotilla::gui
