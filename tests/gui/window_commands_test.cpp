// The window's commands driven through its menus, shortcuts and widgets,
// offscreen, on a database a past session left: presets, cloning a run into
// the designer, the config diff, the run list's filters and sorting, the
// settings kept between launches, and the Nodes tab's Remove for `local`.
#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QHeaderView>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSignalSpy>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <QTimer>
#include <nlohmann/json.hpp>

#include "config_diff.h"
#include "experiment_designer.h"
#include "flotilla/controller/store.h"
#include "flotilla/protocol/config_keys.h"
#include "flotilla/protocol/experiment_config.h"
#include "main_window.h"
#include "nodes_view.h"
#include "run_list.h"
#include "screenshot.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A database as an earlier session left it: experiments and ended or live runs.
class History {
 public:
  History() : db_(QString::fromStdString((dir_.path() / "history.db").string())) {
    controller::Store store(db_);  // created and migrated
  }
  const QString& db() const { return db_; }

  void experiment(const std::string& yaml) {
    const auto config = parse_experiment(yaml, "test");
    controller::Store(db_).save_experiment(config.name, to_json(config));
  }
  void run(const std::string& id, const std::string& yaml, controller::RunState state,
           int64_t created_ms, const std::string& reason = {}) {
    const auto config = parse_experiment(yaml, "test");
    controller::Store store(db_);
    controller::RunRow row;
    row.id = id;
    row.experiment_name = config.name;
    row.config_json = to_json(config);
    row.nodes = config.nodes;
    row.world_size = config.world_size();
    row.created_ms = created_ms;
    store.create_run(row);
    using controller::RunState;
    if (state == RunState::created) return;
    store.transition(id, RunState::starting);
    store.transition(id, RunState::running);
    if (state != RunState::running) store.transition(id, state, reason);
  }

 private:
  testing::TempDir dir_;
  QString db_;
};

// Shows the window (view only: nothing is resumed or started) and waits for
// its lists. `for_keys`: the test types shortcuts, which reach only the
// active window.
void open_window(MainWindow& window, int runs, int experiments, bool for_keys = false) {
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  if (for_keys) {
    // Asks the X server for the input focus itself, as no window manager
    // gives it under a bare Xvfb.
    window.activateWindow();
    ASSERT_TRUE(QTest::qWaitForWindowActive(&window));
  }
  auto* experiment_list = window.findChild<QListWidget*>("experimentList");
  ASSERT_TRUE(wait_until(
      [&] {
        return window.runList()->runs().size() == runs && experiment_list->count() == experiments;
      },
      10s));
}

// Answers the next question box with `button`, keeping its text.
class Answer : public QObject {
 public:
  explicit Answer(QMessageBox::StandardButton button) {
    connect(&timer_, &QTimer::timeout, this, [this, button] {
      if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
        asked_ << box->text();
        box->button(button)->click();
      }
    });
    timer_.start(30);
  }
  const QStringList& asked() const { return asked_; }

 private:
  QTimer timer_;
  QStringList asked_;
};

TEST(WindowCommands, NewFromPresetOffersEveryPresetAndLoadsIt) {
  History history;
  MainWindow window(history.db(), FLOTILLA_AGENT_BINARY, nullptr, true);
  open_window(window, 0, 0);
  const QStringList files = QDir(FLOTILLA_PRESETS_DIR).entryList({"*.yaml"}, QDir::Files);
  ASSERT_GE(files.size(), 5);
  auto* menu = window.findChild<QMenu*>("presetsMenu");
  ASSERT_TRUE(menu);
  EXPECT_EQ(menu->actions().size(), files.size());
  for (const auto& file : files) {
    SCOPED_TRACE(file.toStdString());
    auto* preset = window.findChild<QAction*>("preset:" + QFileInfo(file).completeBaseName());
    ASSERT_TRUE(preset);
    window.tabs()->setCurrentIndex(2);
    preset->trigger();
    QFile in(QString(FLOTILLA_PRESETS_DIR) + "/" + file);
    ASSERT_TRUE(in.open(QIODevice::ReadOnly));
    const std::string text = in.readAll().toStdString();
    EXPECT_EQ(json::parse(window.form()->configJson().toStdString()),
              json::parse(config_document_from_text(text, "preset")));
    EXPECT_EQ(window.form()->name().toStdString(), parse_experiment(text).name);
    EXPECT_EQ(window.tabs()->currentIndex(), 0);
  }
}

TEST(WindowCommands, CtrlDClonesTheSelectedRunIntoTheDesignerUnderANewName) {
  History history;
  history.experiment("name: sgd-base\nbatch_size: 48\noptimizer: {lr: 0.125}\n");
  history.experiment("name: sgd-base-clone\n");
  history.run("run-sgd", "name: sgd-base\nbatch_size: 48\noptimizer: {lr: 0.125}\n",
              controller::RunState::finished, 1000);
  MainWindow window(history.db(), FLOTILLA_AGENT_BINARY, nullptr, true);
  open_window(window, 1, 2, /*for_keys=*/true);
  auto* clone = window.findChild<QAction*>("actionClone");
  ASSERT_TRUE(clone);
  EXPECT_EQ(clone->shortcut(), QKeySequence("Ctrl+D"));
  EXPECT_FALSE(clone->isEnabled()) << "nothing selected yet";
  window.runList()->select("run-sgd");
  ASSERT_TRUE(clone->isEnabled());
  window.form()->setConfigText("name: something-else\n");
  QTest::keyClick(&window, Qt::Key_D, Qt::ControlModifier);
  // "sgd-base-clone" is taken by a stored experiment.
  EXPECT_EQ(window.form()->name(), "sgd-base-clone-2");
  const auto config = json::parse(window.form()->configJson().toStdString());
  EXPECT_EQ(config["batch_size"], 48);
  EXPECT_EQ(config["optimizer"]["lr"], 0.125);
  EXPECT_EQ(window.tabs()->currentIndex(), 0);
  EXPECT_TRUE(window.form()->problems().isEmpty())
      << window.form()->problems().join("; ").toStdString();
}

TEST(ConfigDiff, OnlyTheKeysThatDifferAndADefaultWrittenOutIsNoDifference) {
  const auto a = to_json(parse_experiment("name: a\nbatch_size: 32\noptimizer: {lr: 0.01}\n"));
  const auto b = to_json(parse_experiment("name: b\nbatch_size: 64\n"));  // lr 0.01 by default
  const auto differences = config_differences(QString::fromStdString(a), QString::fromStdString(b));
  QStringList keys;
  for (const auto& d : differences) keys << d.key;
  EXPECT_EQ(keys, (QStringList{"batch_size", "name"}));
  EXPECT_EQ(differences[0].left, "32");
  EXPECT_EQ(differences[0].right, "64");
  EXPECT_TRUE(config_differences(QString::fromStdString(a), QString::fromStdString(a)).isEmpty());
}

TEST(WindowCommands, CompareConfigsShowsOnlyTheDifferingKeysOfAnExperimentAndARun) {
  History history;
  history.experiment("name: small-lr\nstrategy: ddp\nranks_per_node: 2\noptimizer: {lr: 0.01}\n");
  history.run("run-large",
              "name: large-lr\nstrategy: ddp\nranks_per_node: 4\noptimizer: {lr: 0.4}\n",
              controller::RunState::finished, 1000);
  MainWindow window(history.db(), FLOTILLA_AGENT_BINARY, nullptr, true);
  open_window(window, 1, 1);
  QStringList rows;
  QTimer reader;
  QObject::connect(&reader, &QTimer::timeout, [&] {
    auto* dialog = qobject_cast<ConfigDiffDialog*>(QApplication::activeModalWidget());
    if (!dialog) return;
    reader.stop();
    EXPECT_TRUE(dialog->choose("experiment small-lr", "run run-large (large-lr)"));
    for (int row = 0; row < dialog->table()->rowCount(); ++row)
      rows << dialog->table()->item(row, 0)->text() + "=" + dialog->table()->item(row, 1)->text() +
                  "|" + dialog->table()->item(row, 2)->text();
    dialog->reject();
  });
  reader.start(30);
  window.findChild<QAction*>("actionDiff")->trigger();
  EXPECT_EQ(rows,
            (QStringList{"name=small-lr|large-lr", "optimizer.lr=0.01|0.4", "ranks_per_node=2|4"}));
}

TEST(RunListView, FiltersByStateExperimentAndTextAndSortsByAColumn) {
  History history;
  history.run("r1", "name: exp-a\n", controller::RunState::finished, 1000);
  history.run("r2", "name: exp-a\nstrategy: ddp\nranks_per_node: 2\n", controller::RunState::failed,
              2000, "rank 1 ran out of memory");
  history.run("r3", "name: exp-b\nstrategy: ddp\nranks_per_node: 4\n", controller::RunState::killed,
              3000);
  history.run("r4", "name: exp-b\nstrategy: ddp\nranks_per_node: 3\n",
              controller::RunState::finished, 4000);
  history.run("r5", "name: exp-c\n", controller::RunState::running, 5000);
  MainWindow window(history.db(), FLOTILLA_AGENT_BINARY, nullptr, true);
  open_window(window, 5, 0);
  RunList* list = window.runList();
  EXPECT_EQ(list->shownRuns(), (QStringList{"r5", "r4", "r3", "r2", "r1"})) << "newest first";

  list->stateFilter()->setCurrentText("finished");
  EXPECT_EQ(list->shownRuns(), (QStringList{"r4", "r1"}));
  list->stateFilter()->setCurrentText("live");
  EXPECT_EQ(list->shownRuns(), QStringList{"r5"});
  list->stateFilter()->setCurrentText("failed");
  EXPECT_EQ(list->shownRuns(), QStringList{"r2"});
  list->stateFilter()->setCurrentIndex(0);
  list->experimentFilter()->setCurrentText("exp-b");
  EXPECT_EQ(list->shownRuns(), (QStringList{"r4", "r3"}));
  // Select all (Ctrl+A) under the filter: that experiment's runs, oldest
  // first, ready to compare; the hidden ones are not taken.
  list->table()->selectAll();
  EXPECT_EQ(list->selectedRuns(), (QStringList{"r3", "r4"}));
  EXPECT_TRUE(window.findChild<QAction*>("actionCompare")->isEnabled());
  list->table()->clearSelection();
  list->experimentFilter()->setCurrentIndex(0);
  QTest::keyClicks(list->textFilter(), "MEMORY");  // the reason, whatever the case
  EXPECT_EQ(list->shownRuns(), QStringList{"r2"});
  list->textFilter()->clear();
  EXPECT_EQ(list->shownRuns().size(), 5);

  // A click on the Ranks header sorts by the number of ranks; another reverses it.
  QHeaderView* header = list->table()->horizontalHeader();
  const int x = header->sectionViewportPosition(RunList::kRanks) + 5;
  QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, QPoint(x, header->height() / 2));
  const QStringList ascending = list->shownRuns();
  QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, QPoint(x, header->height() / 2));
  const QStringList descending = list->shownRuns();
  EXPECT_EQ(ascending.last(), "r3");  // 4 ranks
  EXPECT_EQ(ascending.mid(2, 2), (QStringList{"r2", "r4"}));
  EXPECT_EQ(descending.first(), "r3");
  EXPECT_EQ(descending.mid(1, 2), (QStringList{"r4", "r2"}));
  list->stateFilter()->setCurrentText("finished");
  save_screenshot(window, "run-list-filtered");
}

TEST(WindowCommands, ShortcutsRunKillRefreshAreInTheMenusAndToolTipsAndKillAsksFirst) {
  History history;
  history.run("live-run", "name: exp-live\n", controller::RunState::running, 1000);
  MainWindow window(history.db(), FLOTILLA_AGENT_BINARY, nullptr, true);
  open_window(window, 1, 0, /*for_keys=*/true);
  const std::pair<const char*, const char*> shortcuts[] = {
      {"actionRun", "Ctrl+R"},          {"actionKill", "Ctrl+K"}, {"actionClone", "Ctrl+D"},
      {"actionRefresh", "F5"},          {"actionNew", "Ctrl+N"},  {"actionSave", "Ctrl+S"},
      {"actionCompare", "Ctrl+Shift+C"}};
  QList<QAction*> in_menus;
  for (auto* menu : window.menuBar()->findChildren<QMenu*>()) in_menus << menu->actions();
  for (const auto& [name, keys] : shortcuts) {
    auto* action = window.findChild<QAction*>(name);
    ASSERT_TRUE(action) << name;
    EXPECT_EQ(action->shortcut(), QKeySequence(keys)) << name;
    EXPECT_TRUE(in_menus.contains(action)) << name << " is in no menu";
  }
  EXPECT_TRUE(window.findChild<QPushButton*>("runButton")->toolTip().contains("Ctrl+R"));
  EXPECT_TRUE(window.findChild<QPushButton*>("killButton")->toolTip().contains("Ctrl+K"));

  // As a person who has just clicked in the run list (a line edit would keep
  // Ctrl+K for itself: delete to the end of the line).
  window.runList()->table()->setFocus();
  QSignalSpy refresh(&window, &MainWindow::requestRefresh);
  QTest::keyClick(&window, Qt::Key_F5);
  EXPECT_GE(refresh.count(), 1);

  QSignalSpy start(&window, &MainWindow::requestStart);
  ASSERT_TRUE(window.form()->setConfigText("name: by-shortcut\nmax_steps: 1\n"));
  ASSERT_TRUE(window.form()->problems().isEmpty());
  QTest::keyClick(&window, Qt::Key_R, Qt::ControlModifier);
  ASSERT_EQ(start.count(), 1);
  EXPECT_EQ(json::parse(start.front().front().toString().toStdString())["name"], "by-shortcut");

  QSignalSpy kill(&window, &MainWindow::requestKill);
  window.runList()->select("live-run");
  {
    Answer no(QMessageBox::No);
    QTest::keyClick(&window, Qt::Key_K, Qt::ControlModifier);
    ASSERT_EQ(no.asked().size(), 1);
    EXPECT_TRUE(no.asked().front().contains("live-run")) << no.asked().front().toStdString();
  }
  EXPECT_EQ(kill.count(), 0);
  EXPECT_EQ(window.listedState("live-run"), "running");
  // The question box has gone: the window is the active one again.
  QApplication::setActiveWindow(&window);
  ASSERT_TRUE(QTest::qWaitForWindowActive(&window));
  window.runList()->table()->setFocus();
  {
    Answer yes(QMessageBox::Yes);
    QTest::keyClick(&window, Qt::Key_K, Qt::ControlModifier);
    ASSERT_EQ(yes.asked().size(), 1);
  }
  ASSERT_EQ(kill.count(), 1);
  EXPECT_EQ(kill.front().front().toString(), "live-run");
  EXPECT_EQ(window.listedState("live-run"), "killing…");
  EXPECT_FALSE(window.findChild<QAction*>("actionKill")->isEnabled());
}

TEST(WindowSettings, GeometrySplittersLastTabAndColumnWidthsComeBack) {
  QSettings(QSettings::IniFormat, QSettings::UserScope, "flotilla", "flotilla-gui").clear();
  History history;
  history.run("r1", "name: exp-a\n", controller::RunState::finished, 1000);
  QList<int> splitter_sizes, designer_sizes;
  {
    MainWindow window(history.db(), FLOTILLA_AGENT_BINARY);
    open_window(window, 1, 0);
    window.resize(1234, 876);
    auto* splitter = window.findChild<QSplitter*>("mainSplitter");
    splitter->setSizes({333, 1234 - 333 - splitter->handleWidth()});
    splitter_sizes = splitter->sizes();
    auto* designer = window.findChild<QSplitter*>("designerSplitter");
    designer->setSizes({500, 300});
    designer_sizes = designer->sizes();
    window.runList()->table()->setColumnWidth(RunList::kExperiment, 171);
    window.nodesView()->table()->setColumnWidth(NodesView::kHost, 191);
    window.tabs()->setCurrentWidget(window.nodesView());
  }
  MainWindow window(history.db(), FLOTILLA_AGENT_BINARY);
  open_window(window, 1, 0);
  EXPECT_EQ(window.size(), QSize(1234, 876));
  EXPECT_EQ(window.findChild<QSplitter*>("mainSplitter")->sizes(), splitter_sizes);
  EXPECT_EQ(window.tabs()->currentWidget(), window.nodesView());
  window.tabs()->setCurrentIndex(0);
  QTest::qWait(50);
  EXPECT_EQ(window.findChild<QSplitter*>("designerSplitter")->sizes(), designer_sizes);
  // Widths as left, not fitted again to the listed runs and nodes.
  EXPECT_EQ(window.runList()->table()->columnWidth(RunList::kExperiment), 171);
  ASSERT_TRUE(wait_until(
      [&] { return !window.nodesView()->cell("local", NodesView::kName).isEmpty(); }, 10s));
  EXPECT_EQ(window.nodesView()->table()->columnWidth(NodesView::kHost), 191);
}

TEST(NodesView, RemoveIsDisabledForTheLocalNodeAndSaysWhy) {
  History history;
  {
    controller::Store store(history.db());
    controller::NodeRow node;
    node.name = "gpu-01";
    node.host = "10.0.0.5";
    store.add_node(node);
  }
  MainWindow window(history.db(), FLOTILLA_AGENT_BINARY, nullptr, true);
  open_window(window, 0, 0);
  NodesView* view = window.nodesView();
  window.tabs()->setCurrentWidget(view);
  ASSERT_TRUE(wait_until([&] { return view->table()->rowCount() == 2; }, 10s));
  auto* remove = window.findChild<QPushButton*>("removeNodeButton");
  auto select = [&](const QString& name) {
    view->table()->clearSelection();
    for (int row = 0; row < view->table()->rowCount(); ++row)
      if (view->table()->item(row, NodesView::kName)->text() == name) view->table()->selectRow(row);
  };
  select("local");
  EXPECT_FALSE(remove->isEnabled());
  EXPECT_TRUE(remove->toolTip().contains("this machine")) << remove->toolTip().toStdString();
  select("gpu-01");
  EXPECT_TRUE(remove->isEnabled());
  EXPECT_FALSE(remove->toolTip().contains("this machine"));
}

}  // namespace
}  // namespace flotilla::gui
