// The Sweeps tab on a real SQLite store: each sweep's progress counted by
// state, the selected sweep's points, and "Kill sweep" asked and confirmed
// before the window's worker is told.
#include <gtest/gtest.h>

#include <QApplication>
#include <QGuiApplication>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QTimer>

#include "flotilla/controller/store.h"
#include "flotilla/controller/sweep_store.h"
#include "screenshot.h"
#include "sweep_view.h"
#include "table_cell.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;

// A ladder of four batches: the first finished, the second out of memory,
// the third skipped after it, the fourth still queued.
void store_ladder(const QString& db) {
  controller::Store store(db);
  controller::SweepStore sweeps(store);
  const auto spec = parse_sweep(
      "name: ladder\nbase: {model: small_cnn, dataset: synthetic, max_steps: 2}\n"
      "axes: {batch_size: [8, 16, 32, 64]}\n");
  const auto id = sweeps.create(spec, expand_sweep(spec), "ladder.yaml", "test-owner");
  ASSERT_TRUE(sweeps.claim(id, 0, "run-a", "test-owner"));
  ASSERT_TRUE(sweeps.end_point(id, 0, controller::PointState::finished, ""));
  ASSERT_TRUE(sweeps.claim(id, 1, "run-b", "test-owner"));
  ASSERT_TRUE(sweeps.end_point(id, 1, controller::PointState::oom, "out of memory (batch 16)"));
  EXPECT_EQ(sweeps.skip(id, {{2, "oom at batch_size 16"}}).size(), 1u);
}

TEST(SweepView, ShowsEachSweepsProgressAndItsPointsAndAsksBeforeKilling) {
  testing::TempDir dir;
  const QString db = QString::fromStdString((dir.path() / "sweeps.db").string());
  store_ladder(db);

  SweepView view(db);
  view.resize(1100, 600);
  view.show();
  auto* sweeps = view.sweepTable();
  ASSERT_TRUE(wait_until([&] { return sweeps->rowCount() == 1; }, 10s));
  // Sweep, State, Points, Done, Running, Queued, OOM, Failed, Skipped, Refused
  EXPECT_EQ(cell(sweeps, 0, 0), "ladder");
  EXPECT_EQ(cell(sweeps, 0, 1), "running");
  EXPECT_EQ(cell(sweeps, 0, 2), "4");
  EXPECT_EQ(cell(sweeps, 0, 3), "2");
  EXPECT_EQ(cell(sweeps, 0, 4), "0");
  EXPECT_EQ(cell(sweeps, 0, 5), "1");
  EXPECT_EQ(cell(sweeps, 0, 6), "1");
  EXPECT_EQ(cell(sweeps, 0, 8), "1");
  EXPECT_FALSE(view.killButton()->isEnabled());  // nothing selected

  sweeps->selectRow(0);
  auto* points = view.pointTable();
  ASSERT_EQ(points->rowCount(), 4);
  EXPECT_EQ(cell(points, 0, 1), "batch_size 8");
  EXPECT_EQ(cell(points, 0, 2), "finished");
  EXPECT_EQ(cell(points, 0, 3), "run-a");
  EXPECT_EQ(cell(points, 1, 2), "oom");
  EXPECT_EQ(cell(points, 2, 2), "skipped");
  EXPECT_EQ(cell(points, 2, 4), "oom at batch_size 16");
  EXPECT_EQ(cell(points, 3, 2), "queued");
  ASSERT_TRUE(view.killButton()->isEnabled());
  save_screenshot(view, "sweep-view");

  // Kill: asked first; "No" tells nobody, "Yes" tells the worker.
  QSignalSpy asked_to_kill(&view, &SweepView::killRequested);
  for (auto answer : {QMessageBox::No, QMessageBox::Yes}) {
    QString question;
    QTimer answering;
    QObject::connect(&answering, &QTimer::timeout, [&] {
      if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
        question = box->text();
        box->button(answer)->click();
      }
    });
    answering.start(20);
    QTest::mouseClick(view.killButton(), Qt::LeftButton);
    ASSERT_TRUE(wait_until([&] { return !question.isEmpty(); }, 10s));
    EXPECT_TRUE(question.contains("Kill sweep ladder?")) << question.toStdString();
  }
  ASSERT_EQ(asked_to_kill.count(), 1);
  EXPECT_EQ(asked_to_kill.front().front().toString(), "ladder");

  // A sweep killed elsewhere shows as killed on the next read, Kill disabled.
  {
    controller::Store store(db);
    controller::SweepStore stored(store);
    ASSERT_TRUE(stored.kill(stored.sweep("ladder")->id, "killed on request"));
  }
  view.refresh();
  ASSERT_TRUE(wait_until([&] { return cell(sweeps, 0, 1).startsWith("killed"); }, 10s));
  EXPECT_EQ(cell(sweeps, 0, 5), "0");  // the queued point was skipped
  EXPECT_EQ(cell(sweeps, 0, 8), "2");
  EXPECT_FALSE(view.killButton()->isEnabled());
}

TEST(SweepView, CompareOpensTheRunsThatFinishedOrRanOutOfMemory) {
  testing::TempDir dir;
  const QString db = QString::fromStdString((dir.path() / "sweeps.db").string());
  store_ladder(db);
  SweepView view(db);
  view.show();
  auto* sweeps = view.sweepTable();
  ASSERT_TRUE(wait_until([&] { return sweeps->rowCount() == 1; }, 10s));
  EXPECT_FALSE(view.compareButton()->isEnabled());  // nothing selected
  EXPECT_FALSE(view.compareAction()->isEnabled());

  sweeps->selectRow(0);
  // run-a finished, run-b out of memory (an OOM row, as the seeds keep);
  // the skipped and the queued point have no run.
  EXPECT_EQ(view.comparableRuns(), (QStringList{"run-a", "run-b"}));
  ASSERT_TRUE(view.compareButton()->isEnabled());
  QSignalSpy compare(&view, &SweepView::compareRequested);
  QTest::mouseClick(view.compareButton(), Qt::LeftButton);
  ASSERT_EQ(compare.count(), 1);
  EXPECT_EQ(compare.front().front().toStringList(), (QStringList{"run-a", "run-b"}));
  // The same command from the sweep list's own menu and its shortcut.
  EXPECT_TRUE(view.sweepTable()->actions().contains(view.compareAction()));
  // Shortcuts reach only the active window: asks the X server for the
  // focus itself, as no window manager gives it under a bare Xvfb.
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
  view.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&view));
  sweeps->setFocus();
  QTest::keyClick(sweeps, Qt::Key_C, Qt::ControlModifier | Qt::AltModifier);
  ASSERT_EQ(compare.count(), 2);
}

TEST(SweepView, CompareWaitsForTwoRunsAndSaysWhy) {
  testing::TempDir dir;
  const QString db = QString::fromStdString((dir.path() / "one.db").string());
  {
    controller::Store store(db);
    controller::SweepStore stored(store);
    const auto spec = parse_sweep(
        "name: one\nbase: {model: small_cnn, dataset: synthetic, max_steps: 2}\n"
        "axes: {batch_size: [8, 16]}\n");
    const auto id = stored.create(spec, expand_sweep(spec), "one.yaml", "test-owner");
    ASSERT_TRUE(stored.claim(id, 0, "run-a", "test-owner"));
    ASSERT_TRUE(stored.end_point(id, 0, controller::PointState::finished, ""));
  }
  SweepView view(db);
  view.show();
  ASSERT_TRUE(wait_until([&] { return view.sweepTable()->rowCount() == 1; }, 10s));
  view.sweepTable()->selectRow(0);
  EXPECT_EQ(view.comparableRuns(), QStringList{"run-a"});
  EXPECT_FALSE(view.compareButton()->isEnabled());
  EXPECT_TRUE(view.compareButton()->toolTip().contains("Compare needs two"))
      << view.compareButton()->toolTip().toStdString();
}

TEST(SweepView, SaysSoWhenThereIsNoSweep) {
  testing::TempDir dir;
  const QString db = QString::fromStdString((dir.path() / "empty.db").string());
  { controller::Store store(db); }  // created and migrated, no sweep
  SweepView view(db);
  view.show();
  auto* status = view.findChild<QLabel*>("sweepStatus");
  ASSERT_TRUE(status);
  ASSERT_TRUE(wait_until([&] { return status->text().startsWith("No sweep yet"); }, 10s))
      << status->text().toStdString();
  EXPECT_EQ(view.sweepTable()->rowCount(), 0);
}

}  // namespace
}  // namespace flotilla::gui
