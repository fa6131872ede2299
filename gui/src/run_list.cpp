#include "run_list.h"

#include <QComboBox>
#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLineEdit>
#include <QSet>
#include <QTableWidget>
#include <QVBoxLayout>

#include "flotilla/controller/run_state.h"

namespace flotilla::gui {
namespace {

const QString kAllStates = "Every state";
const QString kLive = "live";
const QString kAllExperiments = "Every experiment";

bool live(const QString& shown_state) {
  return shown_state == "killing…" || is_live_state(shown_state);
}

// Sorts by a number kept beside the text (ranks, start time), not by the text.
class NumberItem : public QTableWidgetItem {
 public:
  NumberItem(const QString& text, qint64 number) : QTableWidgetItem(text) {
    setData(Qt::UserRole, number);
  }
  bool operator<(const QTableWidgetItem& other) const override {
    return data(Qt::UserRole).toLongLong() < other.data(Qt::UserRole).toLongLong();
  }
};

}  // namespace

bool is_live_state(const QString& state) {
  const auto known = controller::run_state_from_name(state.toStdString());
  return known && !controller::is_terminal(*known);
}

RunList::RunList(QWidget* parent) : QWidget(parent) {
  state_filter_ = new QComboBox;
  state_filter_->setObjectName("runStateFilter");
  state_filter_->addItems({kAllStates, kLive, "queued", "finished", "failed", "killed", "oom"});
  state_filter_->setToolTip(
      "Show only the runs in this state (live: created, starting, queued, running)");
  experiment_filter_ = new QComboBox;
  experiment_filter_->setObjectName("runExperimentFilter");
  experiment_filter_->addItem(kAllExperiments);
  experiment_filter_->setToolTip("Show only the runs of this experiment");
  text_filter_ = new QLineEdit;
  text_filter_->setObjectName("runTextFilter");
  text_filter_->setPlaceholderText("Filter: run, experiment, node or reason");
  text_filter_->setClearButtonEnabled(true);

  table_ = new QTableWidget(0, kColumns);
  table_->setObjectName("runTable");
  table_->setHorizontalHeaderLabels({"Run", "State", "Experiment", "Started", "Ranks", "Reason"});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  // Several runs selected (Ctrl/Shift+click): the window compares them.
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  // The Reason gets the rest of the width, elided at its end, with its whole
  // text in the tooltip.
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setTextElideMode(Qt::ElideRight);
  table_->setWordWrap(false);
  table_->horizontalHeader()->setSortIndicator(kStarted, Qt::DescendingOrder);
  table_->setSortingEnabled(true);
  table_->setToolTip("Click a column's header to sort by it");

  auto* filters = new QHBoxLayout;
  filters->addWidget(state_filter_);
  filters->addWidget(experiment_filter_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(filters);
  layout->addWidget(text_filter_);
  layout->addWidget(table_, 1);

  connect(state_filter_, &QComboBox::currentTextChanged, this, &RunList::applyFilters);
  connect(experiment_filter_, &QComboBox::currentTextChanged, this, &RunList::applyFilters);
  connect(text_filter_, &QLineEdit::textChanged, this, &RunList::applyFilters);
  connect(table_, &QTableWidget::itemSelectionChanged, this, &RunList::selectionChanged);
  // A width the person sets is theirs from then on (the stretched last
  // column follows the window, not the person).
  connect(table_->horizontalHeader(), &QHeaderView::sectionResized, this, [this](int section) {
    if (!fitting_ && section != kColumns - 1) columns_restored_ = true;
  });
}

void RunList::showRuns(const QVector<RunItem>& runs, const QSet<QString>& killing) {
  runs_ = runs;
  const QStringList selected_runs = selectedRuns();
  {
    const QSignalBlocker block(table_);
    // Rows are filled unsorted, then sorted once by the header's choice.
    table_->setSortingEnabled(false);
    table_->setRowCount(int(runs.size()));
    for (int row = 0; row < runs.size(); ++row) {
      const auto& r = runs[row];
      const QString state = killing.contains(r.id) ? QString("killing…") : r.state;
      const QString started =
          r.created_ms > 0
              ? QDateTime::fromMSecsSinceEpoch(r.created_ms).toString("yyyy-MM-dd HH:mm:ss")
              : QString();
      const QString reason = r.reason.section('\n', 0, 0);
      QTableWidgetItem* cells[kColumns] = {
          new QTableWidgetItem(r.id),
          new QTableWidgetItem(state),
          new QTableWidgetItem(r.experiment),
          new NumberItem(started, r.created_ms),
          new NumberItem(QString::number(r.world_size), r.world_size),
          new QTableWidgetItem(reason)};
      for (int column = 0; column < kColumns; ++column) {
        cells[column]->setToolTip(column == kReason ? r.reason : cells[column]->text());
        table_->setItem(row, column, cells[column]);
      }
      table_->item(row, kId)->setToolTip(r.id + (r.nodes.isEmpty() ? QString() : " on " + r.nodes));
    }
    table_->setSortingEnabled(true);
    if (!columns_restored_) {
      fitting_ = true;
      table_->resizeColumnsToContents();
      fitting_ = false;
    }
  }
  updateExperimentChoices();
  applyFilters();
  if (!selected_runs.isEmpty()) selectRuns(selected_runs);
}

bool RunList::showState(const QString& run, const QString& state, const QString& reason,
                        bool killing) {
  for (auto& item : runs_)
    if (item.id == run) item.state = state, item.reason = reason;
  const int row = rowOf(run);
  if (row < 0) return false;
  const QString shown = killing ? QString("killing…") : state;
  table_->item(row, kState)->setText(shown);
  table_->item(row, kState)->setToolTip(shown);
  table_->item(row, kReason)->setText(reason.section('\n', 0, 0));
  table_->item(row, kReason)->setToolTip(reason);
  applyFilters();
  return true;
}

void RunList::restoreColumns(const QByteArray& state) {
  columns_restored_ = table_->horizontalHeader()->restoreState(state);
}

const RunItem* RunList::run(const QString& id) const {
  for (const auto& r : runs_)
    if (r.id == id) return &r;
  return nullptr;
}

int RunList::rowOf(const QString& run) const {
  for (int row = 0; row < table_->rowCount(); ++row)
    if (table_->item(row, kId) && table_->item(row, kId)->text() == run) return row;
  return -1;
}

void RunList::select(const QString& run) {
  const int row = rowOf(run);
  if (row >= 0) table_->selectRow(row);
}

QString RunList::selected() const {
  const auto rows = table_->selectionModel()->selectedRows();
  return rows.isEmpty() ? QString() : table_->item(rows.front().row(), kId)->text();
}

QStringList RunList::selectedRuns() const {
  QStringList selected;
  // Rows a filter hides are not chosen: filter by an experiment, Ctrl+A,
  // and every run of that experiment is selected, none other.
  for (const auto& index : table_->selectionModel()->selectedRows())
    if (!table_->isRowHidden(index.row())) selected << table_->item(index.row(), kId)->text();
  QStringList oldest_first;
  for (const auto& r : runs_)
    if (selected.contains(r.id)) oldest_first << r.id;
  return oldest_first;
}

void RunList::selectRuns(const QStringList& runs) {
  table_->clearSelection();
  for (const auto& run : runs)
    if (const int row = rowOf(run); row >= 0)
      table_->selectionModel()->select(table_->model()->index(row, 0),
                                       QItemSelectionModel::Select | QItemSelectionModel::Rows);
}

QString RunList::listedState(const QString& run) const {
  const int row = rowOf(run);
  return row < 0 ? QString() : table_->item(row, kState)->text();
}

QStringList RunList::shownRuns() const {
  QStringList shown;
  for (int row = 0; row < table_->rowCount(); ++row)
    if (!table_->isRowHidden(row)) shown << table_->item(row, kId)->text();
  return shown;
}

void RunList::updateExperimentChoices() {
  QStringList names;
  for (const auto& r : runs_) names << r.experiment;
  names.removeDuplicates();
  names.sort();
  QStringList current;
  for (int i = 1; i < experiment_filter_->count(); ++i) current << experiment_filter_->itemText(i);
  if (names == current) return;
  const QString chosen = experiment_filter_->currentText();
  const QSignalBlocker block(experiment_filter_);
  experiment_filter_->clear();
  experiment_filter_->addItem(kAllExperiments);
  experiment_filter_->addItems(names);
  // A choice whose runs have all gone stays chosen (and shows nothing) rather than jump.
  if (chosen != kAllExperiments && !names.contains(chosen)) experiment_filter_->addItem(chosen);
  experiment_filter_->setCurrentText(chosen);
}

void RunList::applyFilters() {
  const QString state = state_filter_->currentText();
  const QString experiment = experiment_filter_->currentText();
  const QString text = text_filter_->text().trimmed();
  for (int row = 0; row < table_->rowCount(); ++row) {
    const QString shown_state = table_->item(row, kState)->text();
    bool shown = state == kAllStates || (state == kLive ? live(shown_state) : shown_state == state);
    shown &= experiment == kAllExperiments || table_->item(row, kExperiment)->text() == experiment;
    if (shown && !text.isEmpty()) {
      const RunItem* r = run(table_->item(row, kId)->text());
      const QStringList haystack{r ? r->id : QString(), r ? r->experiment : QString(),
                                 r ? r->nodes : QString(), r ? r->reason : QString()};
      shown = haystack.join('\n').contains(text, Qt::CaseInsensitive);
    }
    table_->setRowHidden(row, !shown);
  }
}

}  // namespace flotilla::gui
