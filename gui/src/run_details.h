#pragma once
// The dashboard's Details tab: the run's config as YAML (read-only, to copy),
// its states with time and reason, its nodes and ranks, the summary numbers
// and what could not be read from its records.

#include <QWidget>

#include "flotilla/charts/run_facts.h"

class QLabel;
class QPlainTextEdit;
class QTableWidget;

namespace flotilla::gui {

class RunDetails : public QWidget {
  Q_OBJECT
 public:
  explicit RunDetails(QWidget* parent = nullptr);
  void showFacts(const charts::RunFacts& facts);
  void showNothing(const QString& why);

  QPlainTextEdit* config() const { return config_; }
  QTableWidget* transitions() const { return transitions_; }
  QTableWidget* nodes() const { return nodes_; }
  QTableWidget* summary() const { return summary_; }
  QLabel* skipped() const { return skipped_; }

 private:
  QLabel* title_;
  QPlainTextEdit* config_;
  QTableWidget *transitions_, *nodes_, *summary_;
  QLabel* skipped_;
};

}  // namespace flotilla::gui
