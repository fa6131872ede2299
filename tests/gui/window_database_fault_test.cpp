// The window while another program holds its database's write lock (a
// `sqlite3` shell in BEGIN EXCLUSIVE, as a person inspecting the file
// leaves it): the run the window started trains on, the window says that
// the database refuses writes for as long as it does, its thread keeps
// answering, its dashboard keeps reading, and once the lock is gone every
// record the agent spooled is stored once.
#include <gtest/gtest.h>

#include <QElapsedTimer>
#include <QLabel>
#include <QPushButton>
#include <QTest>
#include <QTimer>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "dashboard.h"
#include "experiment_designer.h"
#include "flotilla/controller/store.h"
#include "form_keys.h"
#include "main_window.h"
#include "screenshot.h"
#include "sqlite_lock_holder.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

size_t lines_in(const std::filesystem::path& file) {
  std::ifstream in(file);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

TEST(WindowDatabaseFault, SaysTheDatabaseRefusesWritesWhileAnotherProgramHoldsItsLock) {
  testing::TempDir dir;
  const auto home = dir.path() / "agent-home";
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString(home.string()));
  const std::string db = (dir.path() / "gui.db").string();
  MainWindow window(QString::fromStdString(db), FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  auto* database_status = child<QLabel>(window, "databaseStatus");
  ASSERT_TRUE(database_status);
  EXPECT_FALSE(database_status->isVisible());

  // Small steps, so that many records a second wait while the lock is held;
  // killed below, long before its last step.
  set_form_keys(window, {{"name", "gui-locked-database"},
                         {"strategy", "ddp"},
                         {"ranks_per_node", "2"},
                         {"batch_size", "4"},
                         {"max_steps", "1000000"},
                         {"threads", "1"}});
  const QString run = press_run(window);
  ASSERT_FALSE(run.isEmpty());
  Dashboard* dashboard = window.dashboard();
  ASSERT_TRUE(wait_until(
      [&] {
        return dashboard->frame() && dashboard->frame()->live &&
               dashboard->frame()->step_records > 0;
      },
      120s));

  // The window's thread is watched from the lock to its release.
  QElapsedTimer clock;
  clock.start();
  qint64 last_tick = 0, longest_gap = 0;
  QTimer heartbeat;
  heartbeat.setInterval(20);
  QObject::connect(&heartbeat, &QTimer::timeout, [&] {
    longest_gap = std::max(longest_gap, clock.elapsed() - last_tick);
    last_tick = clock.elapsed();
  });
  heartbeat.start();

  const auto locked_at = Clock::now();
  testing::SqliteLockHolder holder(db, dir.path() / "sqlite3.txt");
  ASSERT_TRUE(wait_until([&] { return holder.holds(); }, 30s)) << holder.output();
  // The store's busy timeout (10 s) runs out first; then the window says so.
  ASSERT_TRUE(wait_until([&] { return database_status->isVisible(); }, 60s))
      << "the window never said that the database refuses writes";
  const double detected_s = seconds_since(locked_at);
  EXPECT_NE(database_status->toolTip().indexOf(QString::fromStdString(db)), -1)
      << database_status->toolTip().toStdString();
  EXPECT_NE(database_status->toolTip().indexOf("locked"), -1)
      << database_status->toolTip().toStdString();
  save_screenshot(window, "database-refuses-writes");
  const int64_t steps_while_held = dashboard->frame()->step_records;

  const auto released_at = Clock::now();
  holder.commit();
  ASSERT_TRUE(wait_until([&] { return !database_status->isVisible(); }, 60s))
      << "the window still says the database refuses writes";
  const double recovered_s = seconds_since(released_at);
  heartbeat.stop();
  // What waited is stored, and the dashboard's reads (new read-only
  // connections in this process, beside the writer that was refused) see it.
  ASSERT_TRUE(wait_until(
      [&] { return dashboard->frame() && dashboard->frame()->step_records > steps_while_held; },
      60s))
      << "the dashboard did not go past the " << steps_while_held
      << " step records it had while the lock was held";

  emit window.requestKill(run);
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "killed"; }, 60s))
      << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
  const controller::Store store(QString::fromStdString(db), controller::StoreAccess::read_only);
  const auto records = store.records(run.toStdString());
  ASSERT_FALSE(records.empty());
  for (size_t i = 0; i < records.size(); ++i)
    ASSERT_EQ(records[i].seq, static_cast<int64_t>(i + 1)) << "seq not contiguous at " << i;
  EXPECT_EQ(records.back().type, "run_end");
  EXPECT_EQ(records.size(), lines_in(home / "runs" / run.toStdString() / "spool.jsonl"));
  std::printf(
      "locked database: the window said so %.1f s after the lock, and that it takes writes "
      "again %.2f s after the release; the window's thread answered within %lld ms throughout; "
      "%zu records stored, each once\n",
      detected_s, recovered_s, static_cast<long long>(longest_gap), records.size());
}

}  // namespace
}  // namespace flotilla::gui
