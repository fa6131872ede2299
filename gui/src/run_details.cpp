#include "run_details.h"

#include <QFontDatabase>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QTableWidget>
#include <QVBoxLayout>

namespace flotilla::gui {
namespace {

QTableWidget* table(const QStringList& headers, const char* name) {
  auto* t = new QTableWidget(0, int(headers.size()));
  t->setObjectName(name);
  t->setHorizontalHeaderLabels(headers);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->verticalHeader()->hide();
  t->horizontalHeader()->setStretchLastSection(true);
  t->setWordWrap(true);
  return t;
}

void fill(QTableWidget* t, const std::vector<QStringList>& rows) {
  t->setRowCount(int(rows.size()));
  for (int r = 0; r < int(rows.size()); ++r)
    for (int c = 0; c < int(rows[size_t(r)].size()) && c < t->columnCount(); ++c) {
      auto* item = new QTableWidgetItem(rows[size_t(r)][c]);
      item->setToolTip(rows[size_t(r)][c]);
      t->setItem(r, c, item);
    }
  t->resizeColumnsToContents();
  t->resizeRowsToContents();
}

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace

RunDetails::RunDetails(QWidget* parent) : QWidget(parent) {
  title_ = new QLabel;
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  config_ = new QPlainTextEdit;
  config_->setObjectName("configYaml");
  config_->setReadOnly(true);
  config_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  transitions_ = table({"State", "At", "Reason"}, "transitionsTable");
  nodes_ = table({"Node", "Host", "Ranks", "GPUs", "Last record", "Records"}, "nodesTable");
  summary_ = table({"", "Value"}, "summaryTable");
  summary_->horizontalHeader()->hide();
  skipped_ = new QLabel;
  skipped_->setObjectName("skippedLabel");
  skipped_->setWordWrap(true);

  auto* grid = new QGridLayout(this);
  grid->addWidget(title_, 0, 0, 1, 2);
  grid->addWidget(new QLabel("Summary"), 1, 0);
  grid->addWidget(summary_, 2, 0);
  grid->addWidget(new QLabel("Config (YAML, read-only)"), 1, 1);
  grid->addWidget(config_, 2, 1, 3, 1);
  grid->addWidget(new QLabel("States"), 3, 0);
  grid->addWidget(transitions_, 4, 0);
  grid->addWidget(new QLabel("Nodes and ranks"), 5, 0, 1, 2);
  grid->addWidget(nodes_, 6, 0, 1, 2);
  grid->addWidget(skipped_, 7, 0, 1, 2);
  grid->setRowStretch(2, 2);
  grid->setRowStretch(4, 1);
  grid->setRowStretch(6, 1);
  grid->setColumnStretch(0, 3);
  grid->setColumnStretch(1, 2);
}

void RunDetails::showFacts(const charts::RunFacts& facts) {
  title_->setText(q(facts.title));
  if (config_->toPlainText() != q(facts.config_yaml)) config_->setPlainText(q(facts.config_yaml));
  std::vector<QStringList> rows;
  for (const auto& t : facts.transitions) rows.push_back({q(t.state), q(t.at), q(t.reason)});
  fill(transitions_, rows);
  rows.clear();
  for (const auto& n : facts.nodes)
    rows.push_back({q(n.node), q(n.host), q(n.ranks), q(n.gpus), q(n.last_record), q(n.records)});
  fill(nodes_, rows);
  rows.clear();
  for (const auto& [what, value] : facts.summary) rows.push_back({q(what), q(value)});
  fill(summary_, rows);
  QStringList skipped;
  for (const auto& s : facts.skipped) skipped << q(s);
  skipped_->setText(skipped.isEmpty() ? "Every record was read."
                                      : "Not read from the records:\n" + skipped.join("\n"));
}

void RunDetails::showNothing(const QString& why) {
  title_->setText(why);
  config_->clear();
  transitions_->setRowCount(0);
  nodes_->setRowCount(0);
  summary_->setRowCount(0);
  skipped_->clear();
}

}  // namespace flotilla::gui
