// The dashboard on a HiDPI screen (this binary runs at QT_SCALE_FACTOR=2,
// offscreen), through its widgets, on a run stored in a real SQLite store:
// while records stream in, every panel is drawn again within a second of new
// data (the last panels used to stay blank when drawing took longer than the
// loader's poll); switching to another run stops the load of a big one at its
// next page.
#include <gtest/gtest.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QGuiApplication>
#include <QLabel>
#include <QSignalSpy>
#include <QTest>
#include <QTimer>

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "background_thread.h"
#include "dashboard.h"
#include "flotilla/charts/panel_widget.h"
#include "flotilla/controller/store.h"
#include "run_rows.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;
using controller::RecordRow;
using controller::RunState;
using controller::Store;
using nlohmann::json;

constexpr double kStartTime = 1'700'000'000.0;

// A fast run's step: noisy, as small batches make it.
std::string step_body(int rank, int64_t step) {
  const double noise = std::sin(double(step) * 1.7 + rank) * std::cos(double(step) * 0.31);
  const double step_ms = 12 + 4 * noise;
  json body = {{"type", "step"},
               {"step", step},
               {"time", kStartTime + 1 + double(step) * 0.012 + rank * 0.001},
               {"epoch", 0},
               {"samples", 4},
               {"samples_per_s", 4 / step_ms * 1000},
               {"step_ms", step_ms},
               {"data_ms", 0.5},
               {"forward_ms", 4 + noise},
               {"backward_ms", 5},
               {"comm_ms", 2 + noise},
               {"comm_busy_ms", 3},
               {"optimizer_ms", 0.5},
               {"bytes_sent", 400000 + 7 * rank},
               {"bytes_recv", 400000},
               {"algbw_gbps", 0.2 + 0.05 * noise},
               {"busbw_gbps", 0.2 + 0.05 * noise}};
  if (rank == 0) body["loss"] = 2.3 / (1.0 + 0.001 * double(step)) + 0.2 * noise;
  return body.dump();
}

// A live 2-rank CPU DDP run with `steps` steps stored; returns the next seq.
int64_t store_live_run(Store& store, const std::string& id, int64_t steps) {
  store.create_run(testing::ddp_run_row(id, "hidpi", 2));
  store.transition(id, RunState::starting);
  store.transition(id, RunState::running);
  int64_t seq = 0;
  for (int rank : {0, 1})
    store.append_record(id, RecordRow{++seq, "local", rank, "start",
                                      json{{"type", "start"},
                                           {"rank", rank},
                                           {"world_size", 2},
                                           {"device", "cpu"},
                                           {"time", kStartTime}}
                                          .dump()});
  for (int64_t step = 1; step <= steps; ++step) {
    for (int rank : {0, 1})
      store.append_record(id, RecordRow{++seq, "local", rank, "step", step_body(rank, step)});
    if (step % 50 == 0)
      store.append_record(id, RecordRow{++seq, "local", -1, "system",
                                        json{{"type", "system"},
                                             {"time", kStartTime + double(step) * 0.012},
                                             {"nic_rx", 1e5 * double(step)},
                                             {"nic_tx", 1e5 * double(step)},
                                             {"cpu_util", 0.9},
                                             {"rank_rss", {{"0", 3e8}, {"1", 3e8}}}}
                                            .dump()});
  }
  store.flush();
  return seq;
}

TEST(Dashboard, RunsAtScaleTwo) {
  // The binary's main sets QT_SCALE_FACTOR=2 before the application exists.
  Dashboard dashboard(QString{});
  dashboard.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&dashboard));
  EXPECT_DOUBLE_EQ(dashboard.devicePixelRatioF(), 2.0);
}

// The nice value of this process's thread named `name`; nullopt while none is.
std::optional<int> nice_of_thread(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (!std::getline(comm, line) || line != name) continue;
    // stat: "tid (comm) state ..." with nice the 19th field, 17th after the ')'.
    std::ifstream stat_file(task.path() / "stat");
    const std::string stat((std::istreambuf_iterator<char>(stat_file)), {});
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i)
      if (i == 19) return std::stoi(field);
  }
  return std::nullopt;
}

// With the ranks of local runs on the same cores, the window's thread must
// win a core from its own loader: the loader runs kNicer (10) nice levels
// below it.
TEST(Dashboard, ItsLoaderRunsAtALowerPriorityThanTheWindow) {
  Dashboard dashboard(QString{});
  const int window_nice = ::getpriority(PRIO_PROCESS, 0);
  ASSERT_TRUE(wait_until([] { return nice_of_thread("dashboard load").has_value(); }, 10s));
  EXPECT_TRUE(wait_until(
      [&] { return nice_of_thread("dashboard load") == std::min(19, window_nice + kNicer); }, 10s))
      << "loader nice " << nice_of_thread("dashboard load").value_or(-100) << ", window "
      << window_nice;
}

TEST(Dashboard, EveryPanelIsDrawnAgainWithinASecondOfNewDataAtScaleTwo) {
  testing::TempDir dir;
  const QString db = QString::fromStdString((dir.path() / "live.db").string());
  Store store(db);
  int64_t seq = store_live_run(store, "fast", 6000);

  Dashboard dashboard(db);
  dashboard.resize(1500, 950);
  dashboard.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&dashboard));
  ASSERT_DOUBLE_EQ(dashboard.devicePixelRatioF(), 2.0);
  dashboard.showRun("fast");
  ASSERT_TRUE(wait_until([&] { return dashboard.framesDrawn() >= 1; }, 60s));

  // A fast run's two ranks, a step each every 10 ms, for six seconds.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> written_step{6000};
  std::thread writer([&] {
    int64_t step = 6000;
    while (!stop) {
      ++step;
      for (int rank : {0, 1})
        store.append_record("fast", RecordRow{++seq, "local", rank, "step", step_body(rank, step)});
      written_step = step;
      std::this_thread::sleep_for(10ms);
    }
  });
  // Each panel's last change of data, seen from the window's thread.
  std::map<charts::PanelKind, const charts::PreparedPanel*> shown;
  std::map<charts::PanelKind, qint64> changed_at, longest_gap;
  QElapsedTimer clock;
  clock.start();
  for (const auto kind : charts::kAllPanels) {
    shown[kind] = dashboard.panel(kind)->panel();
    changed_at[kind] = 0;
    longest_gap[kind] = 0;
  }
  QTimer watch;
  QObject::connect(&watch, &QTimer::timeout, [&] {
    for (const auto kind : charts::kAllPanels) {
      const auto* now = dashboard.panel(kind)->panel();
      if (now == shown[kind]) continue;
      shown[kind] = now;
      longest_gap[kind] = std::max(longest_gap[kind], clock.elapsed() - changed_at[kind]);
      changed_at[kind] = clock.elapsed();
    }
  });
  watch.start(5);
  const int frames_before = dashboard.framesDrawn();
  QTest::qWait(6000);
  stop = true;
  writer.join();
  for (const auto kind : charts::kAllPanels)
    longest_gap[kind] = std::max(longest_gap[kind], clock.elapsed() - changed_at[kind]);
  watch.stop();
  std::printf("%d frames drawn in 6 s; the last built in %.0f ms\n",
              dashboard.framesDrawn() - frames_before,
              dashboard.frame() ? dashboard.frame()->build_ms : -1.0);
  for (const auto kind : charts::kAllPanels)
    EXPECT_LE(longest_gap[kind], 1000)
        << "panel " << charts::name_of(kind) << " went " << longest_gap[kind]
        << " ms without being drawn again while records streamed in";
  // And the last data reaches every panel: the frame drawn whole holds it.
  store.flush();
  const int64_t last = 2 * written_step.load();
  EXPECT_TRUE(
      wait_until([&] { return dashboard.frame() && dashboard.frame()->step_records == last; }, 10s))
      << (dashboard.frame() ? dashboard.frame()->step_records : -1) << " of " << last;
}

// A finished run too long to read at once is painted from its buckets while
// every page of it is read; showing another run meanwhile gives that load up
// at its next page, and the other run is drawn.
TEST(Dashboard, ShowingAnotherRunCancelsTheLoadOfABigOne) {
  testing::TempDir dir;
  const QString db = QString::fromStdString((dir.path() / "big.db").string());
  {
    Store store(db);
    store_live_run(store, "big", 150000);  // 300,000 step records: 15 pages
    store.transition("big", RunState::finished);
    store_live_run(store, "small", 100);
    store.transition("small", RunState::finished);
  }
  Dashboard dashboard(db);
  dashboard.resize(1200, 800);
  dashboard.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&dashboard));
  QSignalSpy cancelled(&dashboard, &Dashboard::loadCancelled);
  auto* status = dashboard.findChild<QLabel*>("dashboardStatus");
  ASSERT_TRUE(status);
  dashboard.showRun("big");
  // The first paint, from buckets, while the pages are read.
  ASSERT_TRUE(wait_turn_by_turn([&] { return status->text().contains("buckets"); }, 60s))
      << status->text().toStdString();
  dashboard.showRun("small");
  ASSERT_TRUE(wait_until([&] { return !cancelled.isEmpty(); }, 30s))
      << "the load of the big run was not cancelled";
  EXPECT_EQ(cancelled.front().front().toStringList(), QStringList{"big"});
  ASSERT_TRUE(wait_until(
      [&] {
        const auto* frame = dashboard.frame();
        return frame && frame->runs == QStringList{"small"} && !frame->live;
      },
      30s));
  EXPECT_EQ(dashboard.frame()->step_records, 200);
}

}  // namespace
}  // namespace flotilla::gui
