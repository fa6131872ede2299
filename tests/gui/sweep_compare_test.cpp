// A real small sweep designed and started in the window (two axes, one of
// them refusing a value), run by the window's controller through the agent
// and flotilla-train, then "Compare" on it in the Sweeps tab: the Compare
// tab opens on the runs of its points that ran.
#include <gtest/gtest.h>

#include <QPushButton>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>

#include "compare_view.h"
#include "experiment_designer.h"
#include "main_window.h"
#include "screenshot.h"
#include "sweep_designer.h"
#include "sweep_view.h"
#include "table_cell.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;

TEST(SweepCompare, ASweepStartedInTheDesignerRunsAndItsRunsOpenInCompare) {
  testing::TempDir dir;
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir.path() / "agent-home").string()));
  MainWindow window(QString::fromStdString((dir.path() / "sweep.db").string()),
                    FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  window.form()->setConfigText(
      "name: tiny\nmodel: small_cnn\ndataset: synthetic\nmax_steps: 12\nthreads: 1\n"
      "synthetic: {shape: [3, 16, 16], classes: 10, train_samples: 512, test_samples: 64}\n");
  ASSERT_TRUE(window.form()->problems().isEmpty())
      << window.form()->problems().join("; ").toStdString();

  // "New sweep…" in the Sweeps tab: the designer over the Experiment tab's experiment.
  window.tabs()->setCurrentWidget(window.sweepView());
  QTest::mouseClick(window.sweepView()->newSweepButton(), Qt::LeftButton);
  auto* designer = window.findChild<SweepDesigner*>("sweepDesigner");
  ASSERT_TRUE(designer);
  ASSERT_TRUE(QTest::qWaitForWindowExposed(designer));
  designer->setAxisKey(0, "batch_size");
  designer->setAxisValues(0, "8, 16");
  designer->setAxisUntilOom(0, true);
  designer->addAxis("optimizer.lr", "0.05, -1");
  ASSERT_TRUE(wait_until([&] { return designer->settled(); }, 10s));
  ASSERT_TRUE(designer->planCurrent()) << designer->problems().join("; ").toStdString();
  EXPECT_EQ(designer->plan().runs, 4);
  EXPECT_EQ(designer->plan().to_run, 2);
  ASSERT_EQ(designer->refusedTable()->rowCount(), 2);
  save_screenshot(*designer, "sweep-designer");

  ASSERT_TRUE(designer->startButton()->isEnabled());
  QTest::mouseClick(designer->startButton(), Qt::LeftButton);
  // Started: the designer closes and the Sweeps tab shows the sweep going.
  ASSERT_TRUE(wait_until([&] { return !designer->isVisible(); }, 30s));
  EXPECT_EQ(window.tabs()->currentWidget(), window.sweepView());
  auto* sweeps = window.sweepView()->sweepTable();
  ASSERT_TRUE(
      wait_until([&] { return sweeps->rowCount() == 1 && cell(sweeps, 0, 1) == "finished"; }, 300s))
      << cell(sweeps, 0, 1).toStdString();
  EXPECT_EQ(cell(sweeps, 0, 0), "tiny-sweep");
  EXPECT_EQ(cell(sweeps, 0, 3), "2");  // done
  EXPECT_EQ(cell(sweeps, 0, 9), "2");  // refused
  ASSERT_EQ(window.sweepView()->selectedSweep(), "tiny-sweep");

  // The points that ran, in point order: those Compare opens.
  auto* points = window.sweepView()->pointTable();
  ASSERT_EQ(points->rowCount(), 4);
  QStringList ran;
  for (int r = 0; r < points->rowCount(); ++r)
    if (cell(points, r, 2) == "finished") ran << cell(points, r, 3);
  ASSERT_EQ(ran.size(), 2);
  EXPECT_EQ(cell(points, 1, 2), "refused");
  EXPECT_EQ(window.sweepView()->comparableRuns(), ran);

  ASSERT_TRUE(window.sweepView()->compareButton()->isEnabled());
  save_screenshot(window, "sweep-tab");
  QTest::mouseClick(window.sweepView()->compareButton(), Qt::LeftButton);
  EXPECT_EQ(window.tabs()->currentWidget(), window.compareView());
  EXPECT_EQ(window.compareView()->runs(), ran);
  auto* summary = window.compareView()->summaryTable();
  ASSERT_TRUE(wait_until([&] { return summary->rowCount() == 2; }, 30s))
      << window.compareView()->statusText().toStdString();
  ASSERT_TRUE(window.compareView()->table());
  EXPECT_EQ(window.compareView()->table()->rows.size(), 2u);
  save_screenshot(window, "sweep-compare");
}

}  // namespace
}  // namespace flotilla::gui
