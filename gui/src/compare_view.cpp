#include "compare_view.h"

#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QSplitter>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <fstream>

#include "dashboard.h"

namespace flotilla::gui {
namespace {

QString text_of(const std::string& s) {
  return QString::fromStdString(s);
}

// Sorts numbers as numbers (a cell's value in Qt::UserRole), empty cells
// last, text as text.
class CompareItem : public QTableWidgetItem {
 public:
  using QTableWidgetItem::QTableWidgetItem;
  bool operator<(const QTableWidgetItem& other) const override {
    const QVariant a = data(Qt::UserRole), b = other.data(Qt::UserRole);
    if (a.isValid() && b.isValid()) return a.toDouble() < b.toDouble();
    if (a.isValid() != b.isValid()) return a.isValid();
    return text() < other.text();
  }
};

constexpr QSize kExportSize{1000, 560};

}  // namespace

CompareView::CompareView(const QString& database, QWidget* parent)
    : QWidget(parent), charts_(new Dashboard(database)), live_timer_(new QTimer(this)) {
  setObjectName("compareView");
  charts_->setObjectName("compareCharts");
  auto* bar = new QWidget;
  buildControls(bar);

  summary_ = new QTableWidget;
  summary_->setObjectName("compareTable");
  summary_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  summary_->setSelectionBehavior(QAbstractItemView::SelectRows);
  summary_->verticalHeader()->hide();
  // In the order compared (baseline first) until a header is clicked.
  summary_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
  summary_->setSortingEnabled(true);
  diff_ = new QTableWidget;
  diff_->setObjectName("configDiffTable");
  diff_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  diff_->verticalHeader()->hide();
  diff_->horizontalHeader()->setStretchLastSection(true);
  table_tabs_ = new QTabWidget;
  table_tabs_->setObjectName("compareTableTabs");
  table_tabs_->addTab(summary_, "Summary");
  table_tabs_->addTab(diff_, "Config diff");

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(table_tabs_);
  splitter->addWidget(charts_);
  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 3);
  splitter->setSizes({300, 600});

  auto* comparing = new QWidget;
  auto* comparing_layout = new QVBoxLayout(comparing);
  comparing_layout->setContentsMargins(0, 0, 0, 0);
  comparing_layout->addWidget(bar);
  comparing_layout->addWidget(splitter, 1);

  auto* nothing = new QLabel(
      "Nothing compared yet: select two or more runs in the run list (Ctrl+click, Shift+click) "
      "and press Compare (Ctrl+Shift+C).");
  nothing->setObjectName("compareNothing");
  nothing->setAlignment(Qt::AlignCenter);
  nothing->setWordWrap(true);
  pages_ = new QStackedWidget;
  pages_->addWidget(nothing);
  pages_->addWidget(comparing);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(pages_);

  live_timer_->setInterval(kLiveRefreshMs);
  connect(live_timer_, &QTimer::timeout, this, [this] {
    if (!waiting_) ask();
  });
}

void CompareView::buildControls(QWidget* bar) {
  title_ = new QLabel;
  title_->setObjectName("compareTitle");
  baseline_combo_ = new QComboBox;
  baseline_combo_->setObjectName("baselineCombo");
  baseline_combo_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  baseline_combo_->setToolTip("The run speed-up and the efficiencies are relative to");
  table_button_ = new QToolButton;
  table_button_->setObjectName("exportTableButton");
  table_button_->setText("Export table…");
  table_button_->setToolTip("The summary as CSV, or as Markdown with the config diff");
  connect(table_button_, &QToolButton::clicked, this, &CompareView::chooseTableFile);
  charts_button_ = new QToolButton;
  charts_button_->setObjectName("exportChartsButton");
  charts_button_->setText("Export charts");
  charts_button_->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(charts_button_);
  menu->addAction("PNG files…", this, [this] { chooseChartsDirectory("png"); });
  menu->addAction("SVG files…", this, [this] { chooseChartsDirectory("svg"); });
  charts_button_->setMenu(menu);
  report_button_ = new QToolButton;
  report_button_->setObjectName("exportReportButton");
  report_button_->setText("Export report…");
  report_button_->setToolTip(
      "What `flotilla report` writes: report.md, summary.csv and the charts as PNG");
  connect(report_button_, &QToolButton::clicked, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, "Write the report to");
    if (!dir.isEmpty()) exportReport(dir);
  });
  status_ = new QLabel;
  status_->setObjectName("compareStatus");
  status_->setWordWrap(true);

  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(4, 4, 4, 2);
  row->addWidget(title_);
  row->addSpacing(12);
  row->addWidget(new QLabel("baseline:"));
  row->addWidget(baseline_combo_);
  row->addSpacing(12);
  row->addWidget(table_button_);
  row->addWidget(charts_button_);
  row->addWidget(report_button_);
  row->addSpacing(12);
  row->addWidget(status_, 1);

  connect(baseline_combo_, &QComboBox::currentIndexChanged, this, [this] {
    if (!runs_.isEmpty()) ask();
  });
}

void CompareView::compare(const QStringList& runs) {
  runs_ = runs;
  table_.reset();
  error_.clear();
  {
    QSignalBlocker block(baseline_combo_);
    baseline_combo_->clear();
    baseline_combo_->addItems(runs);
  }
  title_->setText(QString("Comparing %1 runs").arg(runs.size()));
  summary_->setRowCount(0);
  diff_->setRowCount(0);
  pages_->setCurrentIndex(1);
  charts_->showRuns(runs);
  ask();
}

void CompareView::setBaseline(const QString& run) {
  baseline_combo_->setCurrentIndex(baseline_combo_->findText(run));
}

QString CompareView::baseline() const {
  return baseline_combo_->currentText();
}

void CompareView::ask() {
  waiting_ = true;
  if (!table_) status_->setText("Computing the table…");
  emit requestCompare(runs_, baseline(), ++request_);
}

void CompareView::showTable(std::shared_ptr<const controller::CompareTable> table,
                            quint64 request) {
  if (request != request_) return;  // runs or baseline changed since it was asked
  waiting_ = false;
  error_.clear();
  table_ = std::move(table);
  ++tables_shown_;
  fillSummary(*table_);
  fillDiff(*table_);
  bool live = false;
  for (const auto& row : table_->rows) live = live || row.live;
  if (live)
    live_timer_->start();
  else
    live_timer_->stop();
  QStringList status;
  status << "as of " + QDateTime::fromMSecsSinceEpoch(table_->as_of_ms).toString("HH:mm:ss");
  if (live) status << "live runs: updating";
  for (const auto& w : table_->warnings) status << text_of(w);
  status_->setText(status.join("; "));
  status_->setStyleSheet("");
}

void CompareView::showFailure(const QString& message, quint64 request) {
  if (request != request_) return;
  waiting_ = false;
  live_timer_->stop();
  error_ = message;
  status_->setText(message);
  status_->setStyleSheet("color: #b03a2e;");
}

QString CompareView::statusText() const {
  return status_->text();
}

void CompareView::fillSummary(const controller::CompareTable& table) {
  // Sorting is kept across a refresh but off while filling (rows would move).
  const int sorted_by = summary_->horizontalHeader()->sortIndicatorSection();
  const auto order = summary_->horizontalHeader()->sortIndicatorOrder();
  summary_->setSortingEnabled(false);
  summary_->clear();
  summary_->setColumnCount(int(table.columns.size()));
  summary_->setRowCount(int(table.rows.size()));
  for (int c = 0; c < int(table.columns.size()); ++c) {
    const auto& key = table.columns[size_t(c)];
    const auto* column = controller::find_compare_column(key);
    auto* header = new QTableWidgetItem(text_of(column ? column->header : key));
    header->setData(Qt::UserRole, text_of(key));
    if (column) header->setToolTip(text_of(column->definition));
    summary_->setHorizontalHeaderItem(c, header);
  }
  for (int r = 0; r < int(table.rows.size()); ++r) {
    const auto& row = table.rows[size_t(r)];
    QStringList notes;
    for (const auto& n : row.notes) notes << text_of(n);
    for (int c = 0; c < int(table.columns.size()); ++c) {
      const auto& key = table.columns[size_t(c)];
      auto* item = new CompareItem(text_of(controller::cell_text(table, row, key)));
      const auto cell = row.cells.find(key);
      if (cell != row.cells.end() && cell->second.number)
        item->setData(Qt::UserRole, *cell->second.number);
      const auto* column = controller::find_compare_column(key);
      if (column && column->decimals >= 0)
        item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (row.baseline || row.live) {
        QFont font = item->font();
        font.setBold(row.baseline);
        font.setItalic(row.live);
        item->setFont(font);
      }
      if (!notes.isEmpty()) item->setToolTip(notes.join("\n"));
      summary_->setItem(r, c, item);
    }
  }
  summary_->resizeColumnsToContents();
  summary_->horizontalHeader()->setSortIndicator(
      sorted_by < summary_->columnCount() ? sorted_by : -1, order);
  summary_->setSortingEnabled(true);  // sorts by the indicator's column, if any
}

void CompareView::fillDiff(const controller::CompareTable& table) {
  const auto& diff = table.config_diff;
  diff_->clear();
  diff_->setColumnCount(int(table.rows.size()) + 1);
  QStringList headers{"config key"};
  for (const auto& row : table.rows) headers << text_of(row.run.id);
  diff_->setHorizontalHeaderLabels(headers);
  diff_->setRowCount(int(diff.keys.size()));
  for (int k = 0; k < int(diff.keys.size()); ++k) {
    diff_->setItem(k, 0, new QTableWidgetItem(text_of(diff.keys[size_t(k)])));
    for (int i = 0; i < int(diff.values[size_t(k)].size()); ++i)
      diff_->setItem(k, i + 1, new QTableWidgetItem(text_of(diff.values[size_t(k)][size_t(i)])));
  }
  diff_->resizeColumnsToContents();
  table_tabs_->setTabText(1, QString("Config diff (%1 keys)").arg(diff.keys.size()));
}

QString CompareView::exportTable(const QString& file) const {
  if (!table_) return "nothing compared yet";
  const bool csv = file.endsWith(".csv", Qt::CaseInsensitive);
  const auto text = controller::format_compare(
      *table_, csv ? controller::CompareFormat::csv : controller::CompareFormat::markdown);
  std::ofstream out(file.toStdString(), std::ios::binary);
  out << text;
  out.close();
  if (!out) return "cannot write " + file;
  return {};
}

QString CompareView::exportCharts(const QString& dir, const QString& format,
                                  QStringList* written) const {
  if (format != "png" && format != "svg") return "charts export as png or svg, not " + format;
  if (!QDir().mkpath(dir)) return "cannot create the folder " + dir;
  QStringList problems;
  for (const auto kind : charts::kAllPanels) {
    const auto* panel = charts_->panel(kind);
    if (!panel->panel() || panel->panel()->description.series.empty()) continue;
    const auto name = charts::name_of(kind);
    const QString file = QDir(dir).filePath(
        "compare-" + QString::fromLatin1(name.data(), int(name.size())) + "." + format);
    const QString error = panel->saveImage(file, kExportSize);
    if (!error.isEmpty())
      problems << error;
    else if (written)
      *written << file;
  }
  return problems.join("\n");
}

void CompareView::exportReport(const QString& dir) {
  if (runs_.size() < 2) return emit reportDone({}, "nothing compared yet");
  report_button_->setEnabled(false);  // one report at a time
  status_->setText("Writing the report to " + dir + "…");
  emit requestReport(runs_, baseline(), dir);
}

void CompareView::reportWritten(const QString& markdown, const QStringList& problems) {
  report_button_->setEnabled(true);
  status_->setText("Report written: " + markdown +
                   (problems.isEmpty() ? QString() : "; not drawn: " + problems.join("; ")));
  emit reportDone(markdown, problems.join("\n"));
}

void CompareView::reportFailed(const QString& message) {
  report_button_->setEnabled(true);
  status_->setText("No report: " + message);
  emit reportDone({}, message);
}

void CompareView::chooseTableFile() {
  if (!table_) return;
  const QString file = QFileDialog::getSaveFileName(this, "Export compare table", "compare.md",
                                                    "Markdown (*.md);;CSV (*.csv)");
  if (file.isEmpty()) return;
  const QString error = exportTable(file);
  if (!error.isEmpty()) QMessageBox::warning(this, "Flotilla", error);
}

void CompareView::chooseChartsDirectory(const QString& format) {
  const QString dir = QFileDialog::getExistingDirectory(this, "Export charts to");
  if (dir.isEmpty()) return;
  const QString error = exportCharts(dir, format);
  if (!error.isEmpty()) QMessageBox::warning(this, "Flotilla", error);
}

}  // namespace flotilla::gui
