// The Compare tab driven through the window's widgets on three real runs
// started by the real CLI (Fashion-MNIST through the real agent: DDP on one
// rank, on two, and on two with half the batch, the last still training when
// the comparison opens): the table equals `flotilla compare --format json`
// for the same runs and baseline, the config diff holds the keys that
// differ, the panels overlay one line a run, a live run's row follows it to
// its end, and the exports write what the CLI prints.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QGuiApplication>
#include <QHeaderView>
#include <QPushButton>
#include <QScreen>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <QWindow>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "compare_view.h"
#include "dashboard.h"
#include "flotilla/controller/store.h"
#include "main_window.h"
#include "processes.h"
#include "screenshot.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Cli {
 public:
  explicit Cli(const testing::TempDir& dir) : dir_(dir) {}
  std::string db() const { return (dir_.path() / "compare.db").string(); }
  // Starts `flotilla --db DB args...`; the caller waits.
  std::unique_ptr<testing::ChildProcess> start(const std::vector<std::string>& args) {
    std::vector<std::string> argv{FLOTILLA_CLI_BINARY, "--db", db()};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<testing::ChildProcess>(
        argv, dir_.path() / ("out-" + std::to_string(++calls_) + ".txt"),
        std::vector<std::string>{"FLOTILLA_HOME=" + (dir_.path() / "agent-home").string()});
  }
  std::string run(const std::vector<std::string>& args) {
    auto child = start(args);
    const auto status = child->wait(300s);
    EXPECT_EQ(status, 0) << "flotilla " << args.front() << ": " << child->output();
    return child->output();
  }
  std::filesystem::path experiment(const std::string& name, int ranks, int batch, int steps) {
    const auto file = dir_.path() / (name + ".yaml");
    std::ofstream(file) << read_text(std::string(FLOTILLA_PRESETS_DIR) +
                                     "/fashion_mnist_small_cnn.yaml")
                        << "\nname: " << name << "\nstrategy: ddp\nranks_per_node: " << ranks
                        << "\nbatch_size: " << batch
                        << "\nthreads: 1\nepochs: 1\nmax_steps: " << steps << "\n";
    return file;
  }

 private:
  const testing::TempDir& dir_;
  int calls_ = 0;
};

// The id of the newest stored run of `experiment`, empty when there is none yet.
std::string run_of(const std::string& db, const std::string& experiment) {
  controller::Store store(QString::fromStdString(db), controller::StoreAccess::read_only);
  std::string id;
  for (const auto& r : store.runs())
    if (r.experiment_name == experiment) id = r.id;
  return id;
}

void click_row(QTableWidget& table, const QString& run, Qt::KeyboardModifiers modifiers) {
  for (int row = 0; row < table.rowCount(); ++row)
    if (table.item(row, 0)->text() == run) {
      const QRect cell = table.visualItemRect(table.item(row, 0));
      QTest::mouseClick(table.viewport(), Qt::LeftButton, modifiers, cell.center());
      return;
    }
  ADD_FAILURE() << run.toStdString() << " is not in the run list";
}

// The window's summary cell of `run` in column `key`.
QTableWidgetItem* summary_cell(QTableWidget& table, const std::string& run,
                               const std::string& key) {
  int run_column = -1, key_column = -1;
  for (int c = 0; c < table.columnCount(); ++c) {
    const auto k = table.horizontalHeaderItem(c)->data(Qt::UserRole).toString().toStdString();
    if (k == "run") run_column = c;
    if (k == key) key_column = c;
  }
  if (run_column < 0 || key_column < 0) return nullptr;
  for (int row = 0; row < table.rowCount(); ++row)
    if (table.item(row, run_column)->text().toStdString() == run)
      return table.item(row, key_column);
  return nullptr;
}

// Every value of the CLI's JSON rows is what the window's table holds: the
// number itself behind a numeric cell, the text of a text cell, "—" where
// the CLI has none.
void expect_table_equals(QTableWidget& table, const json& cli) {
  std::vector<std::string> keys;
  for (int c = 0; c < table.columnCount(); ++c)
    keys.push_back(table.horizontalHeaderItem(c)->data(Qt::UserRole).toString().toStdString());
  std::vector<std::string> cli_keys;
  for (const auto& column : cli["columns"]) cli_keys.push_back(column["key"]);
  EXPECT_EQ(keys, cli_keys);
  ASSERT_EQ(table.rowCount(), int(cli["rows"].size()));
  for (const auto& row : cli["rows"]) {
    const std::string run = row["run"];
    for (const auto& [key, value] : row["values"].items()) {
      const auto* cell = summary_cell(table, run, key);
      ASSERT_TRUE(cell) << run << " " << key;
      if (value.is_number()) {
        ASSERT_TRUE(cell->data(Qt::UserRole).isValid()) << run << " " << key;
        EXPECT_DOUBLE_EQ(cell->data(Qt::UserRole).toDouble(), value.get<double>())
            << run << " " << key;
      } else if (value.is_string()) {
        EXPECT_EQ(cell->text().toStdString(), value.get<std::string>()) << run << " " << key;
      } else {
        EXPECT_EQ(cell->text(), QString("—")) << run << " " << key;
        EXPECT_FALSE(cell->data(Qt::UserRole).isValid()) << run << " " << key;
      }
    }
  }
}

TEST(CompareView, LinesUpThreeRealRunsAsTheCliDoes) {
  testing::TempDir dir;
  Cli cli(dir);
  cli.run({"run", cli.experiment("ddp1", 1, 64, 40).string()});
  cli.run({"run", cli.experiment("ddp2", 2, 64, 40).string()});
  const std::string one = run_of(cli.db(), "ddp1"), two = run_of(cli.db(), "ddp2");
  ASSERT_FALSE(one.empty());
  ASSERT_FALSE(two.empty());
  // The third trains while the comparison opens.
  auto third_process = cli.start({"run", cli.experiment("ddp2-b32", 2, 32, 160).string()});
  std::string three;
  ASSERT_TRUE(wait_until([&] { return !(three = run_of(cli.db(), "ddp2-b32")).empty(); }, 120s));
  const QStringList runs{QString::fromStdString(one), QString::fromStdString(two),
                         QString::fromStdString(three)};

  // View only: the CLI's controller follows the live run, the window only reads.
  MainWindow window(QString::fromStdString(cli.db()), FLOTILLA_AGENT_BINARY, nullptr, true);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  ASSERT_TRUE(wait_until([&] { return window.listedState(runs[2]) == "running"; }, 120s))
      << window.listedState(runs[2]).toStdString();

  // Selected in the run list with Ctrl+click, then Compare.
  auto* run_table = window.findChild<QTableWidget*>("runTable");
  auto* compare_button = window.findChild<QPushButton*>("compareButton");
  ASSERT_TRUE(run_table && compare_button);
  click_row(*run_table, runs[0], Qt::NoModifier);
  EXPECT_FALSE(compare_button->isEnabled());
  click_row(*run_table, runs[1], Qt::ControlModifier);
  click_row(*run_table, runs[2], Qt::ControlModifier);
  EXPECT_EQ(window.selectedRuns(), runs);
  ASSERT_TRUE(compare_button->isEnabled());
  QTest::mouseClick(compare_button, Qt::LeftButton);
  CompareView* view = window.compareView();
  EXPECT_EQ(window.tabs()->currentWidget(), view);
  EXPECT_EQ(view->runs(), runs);
  EXPECT_EQ(view->baseline(), runs[0]);

  // The live run's row is marked live and followed until its end.
  ASSERT_TRUE(wait_until([&] { return view->table() != nullptr; }, 60s))
      << view->statusText().toStdString();
  ASSERT_EQ(view->table()->rows.size(), 3u);
  EXPECT_TRUE(view->table()->rows[2].live) << "the third run ended before the table was read";
  EXPECT_FALSE(view->table()->rows[0].live);
  const int first_tables = view->tablesShown();
  ASSERT_EQ(third_process->wait(300s), 0) << third_process->output();
  ASSERT_TRUE(wait_until([&] { return view->table() && !view->table()->rows[2].live; },
                         std::chrono::milliseconds(4 * CompareView::kLiveRefreshMs) + 30s));
  EXPECT_GT(view->tablesShown(), first_tables);
  EXPECT_EQ(view->table()->rows[2].run.state, controller::RunState::finished);

  // In the order compared until a header is clicked; then by the number behind the text.
  auto* summary = view->summaryTable();
  for (int row = 0; row < 3; ++row) EXPECT_EQ(summary->item(row, 0)->text(), runs[row]) << row;
  int throughput_column = -1;
  for (int c = 0; c < summary->columnCount(); ++c)
    if (summary->horizontalHeaderItem(c)->data(Qt::UserRole) == "throughput") throughput_column = c;
  ASSERT_GE(throughput_column, 0);
  const QRect header_rect(summary->horizontalHeader()->sectionViewportPosition(throughput_column),
                          0, summary->horizontalHeader()->sectionSize(throughput_column),
                          summary->horizontalHeader()->height());
  QTest::mouseClick(summary->horizontalHeader()->viewport(), Qt::LeftButton, Qt::NoModifier,
                    header_rect.center());
  std::vector<double> sorted;
  for (int row = 0; row < 3; ++row)
    sorted.push_back(summary->item(row, throughput_column)->data(Qt::UserRole).toDouble());
  EXPECT_TRUE(std::is_sorted(sorted.begin(), sorted.end()) ||
              std::is_sorted(sorted.rbegin(), sorted.rend()))
      << sorted[0] << " " << sorted[1] << " " << sorted[2];
  EXPECT_EQ(summary->horizontalHeader()->sortIndicatorSection(), throughput_column);

  // The same numbers as the CLI's JSON, cell by cell, and the same config diff.
  const auto cli_json = json::parse(cli.run({"compare", one, two, three, "--format", "json"}));
  expect_table_equals(*view->summaryTable(), cli_json);
  auto* diff = view->diffTable();
  std::set<std::string> diff_keys;
  for (int row = 0; row < diff->rowCount(); ++row) {
    const auto key = diff->item(row, 0)->text().toStdString();
    diff_keys.insert(key);
    ASSERT_TRUE(cli_json["config_diff"].contains(key)) << key;
    for (int run = 0; run < 3; ++run)
      EXPECT_EQ(diff->item(row, run + 1)->text().toStdString(),
                cli_json["config_diff"][key][size_t(run)].get<std::string>())
          << key;
  }
  EXPECT_EQ(diff_keys.size(), cli_json["config_diff"].size());
  for (const auto* key : {"name", "ranks_per_node", "batch_size", "max_steps"})
    EXPECT_TRUE(diff_keys.count(key)) << key;
  EXPECT_FALSE(diff_keys.count("model"));

  // The charts overlay the three runs: one job line, one colour, a run.
  Dashboard* charts = view->charts();
  ASSERT_TRUE(wait_until(
      [&] { return charts->frame() && !charts->frame()->live && charts->frame()->runs == runs; },
      60s));
  for (const auto kind : {charts::PanelKind::throughput, charts::PanelKind::step_time}) {
    const auto& panel = charts->panel(kind)->panel()->description;
    std::vector<std::string> bold_runs;
    std::set<int> colours;
    for (const auto& series : panel.series)
      if (series.style == charts::SeriesStyle::bold) {
        bold_runs.push_back(series.run);
        colours.insert(series.colour);
      }
    EXPECT_EQ(bold_runs, (std::vector<std::string>{one, two, three})) << charts::name_of(kind);
    EXPECT_EQ(colours.size(), 3u) << charts::name_of(kind);
  }
  save_screenshot(window, "compare-three-runs");

  // Another baseline, chosen in its combo box: the CLI's numbers for it.
  const int before = view->tablesShown();
  auto* baseline = view->findChild<QComboBox*>("baselineCombo");
  ASSERT_TRUE(baseline);
  baseline->setCurrentIndex(1);
  ASSERT_TRUE(wait_until([&] { return view->tablesShown() > before; }, 60s));
  EXPECT_EQ(view->table()->baseline, 1u);
  expect_table_equals(
      *view->summaryTable(),
      json::parse(cli.run({"compare", one, two, three, "--baseline", two, "--format", "json"})));
  EXPECT_EQ(summary_cell(*view->summaryTable(), two, "speedup")->data(Qt::UserRole).toDouble(),
            1.0);

  // Exports: the table as the CLI prints it, the charts as PNG and SVG files.
  const auto csv = dir.path() / "compare.csv";
  const QString csv_error = view->exportTable(QString::fromStdString(csv.string()));
  EXPECT_TRUE(csv_error.isEmpty()) << csv_error.toStdString();
  EXPECT_EQ(read_text(csv),
            cli.run({"compare", one, two, three, "--baseline", two, "--format", "csv"}));
  const auto md = dir.path() / "compare.md";
  const QString md_error = view->exportTable(QString::fromStdString(md.string()));
  EXPECT_TRUE(md_error.isEmpty()) << md_error.toStdString();
  EXPECT_NE(read_text(md).find("| run | experiment | outcome |"), std::string::npos)
      << read_text(md);
  EXPECT_NE(read_text(md).find("### Config diff"), std::string::npos);
  for (const QString format : {"png", "svg"}) {
    QStringList written;
    const QString error = view->exportCharts(
        QString::fromStdString((dir.path() / "charts").string()), format, &written);
    EXPECT_TRUE(error.isEmpty()) << error.toStdString();
    ASSERT_GE(written.size(), 2) << format.toStdString();
    const std::string head = read_text(written.front().toStdString()).substr(0, 8);
    if (format == "png")
      EXPECT_EQ(head, std::string("\x89PNG\r\n\x1a\n", 8));
    else
      EXPECT_NE(read_text(written.front().toStdString()).find("<svg"), std::string::npos);
  }
  EXPECT_EQ(view->exportCharts(QString::fromStdString(dir.path().string()), "gif").toStdString(),
            "charts export as png or svg, not gif");

  // Export report…: what `flotilla report` writes, its charts drawn by
  // flotilla-gui --render off the window's thread.
  QSignalSpy reported(view, &CompareView::reportDone);
  const auto report_dir = dir.path() / "report";
  view->exportReport(QString::fromStdString(report_dir.string()));
  ASSERT_TRUE(wait_until([&] { return !reported.isEmpty(); }, 180s)) << "no report";
  EXPECT_EQ(reported.front().at(1).toString().toStdString(), "");
  ASSERT_EQ(reported.front().at(0).toString().toStdString(), (report_dir / "report.md").string());
  EXPECT_TRUE(std::filesystem::exists(report_dir / "summary.csv"));
  const std::string markdown = read_text(report_dir / "report.md");
  for (const auto& run : runs) EXPECT_NE(markdown.find(run.toStdString()), std::string::npos);
  const std::regex image(R"(!\[[^\]]*\]\(([^)]+)\))");
  int images = 0;
  for (std::sregex_iterator it(markdown.begin(), markdown.end(), image), end; it != end; ++it) {
    ++images;
    EXPECT_EQ(read_text(report_dir / (*it)[1].str()).substr(0, 8),
              std::string("\x89PNG\r\n\x1a\n", 8))
        << (*it)[1].str();
  }
  EXPECT_GE(images, 4);
}

}  // namespace
}  // namespace flotilla::gui
