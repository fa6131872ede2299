// The main window driven through its own widgets (offscreen in CI, or under
// Xvfb for a screenshot): Run a short experiment, watch every dashboard
// panel fill while it trains and the run finish.
#include <gtest/gtest.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QGuiApplication>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QSpinBox>
#include <QSysInfo>
#include <QTabWidget>
#include <QTest>
#include <QTimer>
#include <QWindow>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include "dashboard.h"
#include "experiment_designer.h"
#include "flotilla/charts/panel_widget.h"
#include "flotilla/controller/store.h"
#include "flotilla/controller/sweep_store.h"
#include "form_keys.h"
#include "main_window.h"
#include "processes.h"
#include "run_list.h"
#include "screenshot.h"
#include "temp_dir.h"
#include "test_cluster.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;

TEST(MainWindow, RunsAnExperimentFromItsRunButtonAndChartsIt) {
  testing::TempDir dir;
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir.path() / "agent-home").string()));
  const QString db = QString::fromStdString((dir.path() / "gui.db").string());
  {
    MainWindow window(db, FLOTILLA_AGENT_BINARY);
    window.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));

    auto* name = child<QLineEdit>(window, "key:name");
    auto* run_button = child<QPushButton>(window, "runButton");
    ASSERT_TRUE(name && run_button);
    set_form_keys(window, {{"name", "gui-fashion-mnist"},
                           {"strategy", "ddp"},
                           {"ranks_per_node", "2"},
                           {"batch_size", "32"},
                           {"max_steps", "120"},
                           {"threads", "1"}});
    EXPECT_TRUE(window.form()->problems().isEmpty())
        << window.form()->problems().join("; ").toStdString();

    // A bad value is named before anything runs, and Run is refused.
    name->setText("");
    EXPECT_FALSE(run_button->isEnabled());
    EXPECT_TRUE(window.form()->problems().contains("name: must not be empty"))
        << window.form()->problems().join("; ").toStdString();
    name->setText("gui-fashion-mnist");
    ASSERT_TRUE(run_button->isEnabled());

    QTest::mouseClick(run_button, Qt::LeftButton);
    Dashboard* dashboard = window.dashboard();
    // Once the run has started, the window shows its dashboard.
    EXPECT_TRUE(wait_until([&] { return window.tabs()->currentWidget() == dashboard; }, 60s));
    // While it trains, frames of the live run arrive and every panel shows
    // series from its records (a CPU run's memory panel: the ranks' RSS).
    ASSERT_TRUE(wait_until(
        [&] {
          const auto* frame = dashboard->frame();
          return frame && frame->live && !frame->coarse && frame->step_records >= 2 * 20;
        },
        120s))
        << "no live frame with 20 steps of both ranks";
    ASSERT_EQ(dashboard->runs().size(), 1);
    const QString run = dashboard->runs().front();
    const std::vector<charts::PanelKind> live_panels = {
        charts::PanelKind::throughput, charts::PanelKind::step_time,
        charts::PanelKind::bandwidth,  charts::PanelKind::communication,
        charts::PanelKind::loss,       charts::PanelKind::memory};
    ASSERT_TRUE(wait_until(
        [&] {
          for (const auto kind : live_panels) {
            const auto* panel = dashboard->panel(kind)->panel();
            if (!panel || panel->description.series.empty()) return false;
          }
          return true;
        },
        60s));
    for (const auto kind : live_panels)
      EXPECT_TRUE(dashboard->panel(kind)->panel()->description.empty_reason.empty())
          << charts::name_of(kind);
    EXPECT_TRUE(window.listedState(run) == "running" || window.listedState(run) == "starting")
        << window.listedState(run).toStdString();
    save_screenshot(window, "live-ddp-run");
    ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "finished"; }, 180s))
        << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
    // The last frame holds every step of both ranks.
    ASSERT_TRUE(wait_until(
        [&] {
          const auto* frame = dashboard->frame();
          return frame && !frame->live && frame->step_records == 2 * 120;
        },
        10s))
        << (dashboard->frame() ? dashboard->frame()->step_records : -1) << " step records";
    EXPECT_FALSE(child<QPushButton>(window, "killButton")->isEnabled());
  }
  controller::Store store(db);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, controller::RunState::finished);
  EXPECT_EQ(runs[0].experiment_name, "gui-fashion-mnist");
  ASSERT_TRUE(store.experiment("gui-fashion-mnist"));
}

// A run of small steps streams hundreds of records a second into the store
// while the dashboard follows it: the window's thread must keep answering.
// A heartbeat timer on that thread records the longest wait between two of
// its ticks; 2 s is far above what a person tolerates, so that two loaded
// cores cannot make it flaky, and far below the 16 to 25 s stalls that
// wide dashed lines caused (docs/dashboard.md, Performance).
TEST(MainWindow, StaysResponsiveWhileAFastRunStreamsIntoTheDashboard) {
  testing::TempDir dir;
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir.path() / "agent-home").string()));
  const QString db = QString::fromStdString((dir.path() / "gui.db").string());
  MainWindow window(db, FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  set_form_keys(window, {{"name", "gui-fast-steps"},
                         {"strategy", "ddp"},
                         {"ranks_per_node", "2"},
                         {"batch_size", "4"},
                         {"max_steps", "1500"},
                         {"threads", "1"}});
  QElapsedTimer clock;
  clock.start();
  qint64 last_tick = 0, longest_gap = 0;
  QTimer heartbeat;
  heartbeat.setInterval(20);
  QObject::connect(&heartbeat, &QTimer::timeout, [&] {
    longest_gap = std::max(longest_gap, clock.elapsed() - last_tick);
    last_tick = clock.elapsed();
  });
  const QString run = press_run(window);
  ASSERT_FALSE(run.isEmpty());
  Dashboard* dashboard = window.dashboard();
  // From the first live frame on, the dashboard draws while records stream.
  ASSERT_TRUE(wait_until(
      [&] {
        const auto* frame = dashboard->frame();
        return frame && frame->live && frame->step_records > 0;
      },
      120s));
  last_tick = clock.elapsed();
  heartbeat.start();
  const int frames_before = dashboard->framesDrawn();
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "finished"; }, 300s))
      << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
  ASSERT_TRUE(wait_until(
      [&] {
        const auto* frame = dashboard->frame();
        return frame && !frame->live && frame->step_records == 2 * 1500;
      },
      30s));
  heartbeat.stop();
  // Frames of the live run were drawn while the heartbeat ran, and the
  // window's thread never went 2 s without running its timer.
  EXPECT_GE(dashboard->framesDrawn() - frames_before, 3);
  EXPECT_LT(longest_gap, 2000) << "the window's thread did not answer for " << longest_gap << " ms";
  std::printf("window thread: longest heartbeat gap %lld ms over %d frames\n",
              static_cast<long long>(longest_gap), dashboard->framesDrawn() - frames_before);
}

// A run killed after its first checkpoints goes on from the window: Resume is
// offered only for an ended run that saved checkpoints, and its new attempt
// trains to the end from the newest one.
TEST(MainWindow, ResumesAKilledRunFromItsNewestCheckpoint) {
  testing::TempDir dir;
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir.path() / "agent-home").string()));
  const QString db = QString::fromStdString((dir.path() / "gui.db").string());
  MainWindow window(db, FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  set_form_keys(window, {{"name", "gui-resume"},
                         {"strategy", "ddp"},
                         {"ranks_per_node", "2"},
                         {"batch_size", "16"},
                         {"max_steps", "150"},
                         {"threads", "1"},
                         {"save.every_steps", "5"}});
  auto* resume = child<QPushButton>(window, "resumeButton");
  const QString run = press_run(window);
  ASSERT_FALSE(run.isEmpty());
  window.runList()->select(run);
  EXPECT_FALSE(resume->isEnabled()) << "a live run is not resumed";
  Dashboard* dashboard = window.dashboard();
  ASSERT_TRUE(wait_until(
      [&] { return dashboard->frame() && dashboard->frame()->step_records >= 2 * 12; }, 120s));
  QTimer answer;  // the kill's question, answered as a person would
  QObject::connect(&answer, &QTimer::timeout, [&] {
    if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget()))
      box->button(QMessageBox::Yes)->click();
  });
  answer.start(50);
  QTest::mouseClick(child<QPushButton>(window, "killButton"), Qt::LeftButton);
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "killed"; }, 60s))
      << window.listedState(run).toStdString();
  answer.stop();
  window.runList()->select(run);
  ASSERT_TRUE(wait_until([&] { return resume->isEnabled(); }, 10s))
      << resume->toolTip().toStdString();
  window.tabs()->setCurrentIndex(0);  // where the button is
  save_screenshot(window, "resume-offered");
  window.tabs()->setCurrentWidget(dashboard);

  QTest::mouseClick(resume, Qt::LeftButton);
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "finished"; }, 180s))
      << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
  EXPECT_FALSE(resume->isEnabled()) << "a finished run has nothing to resume";
  // The dashboard followed the new attempt to its last step (the steps it
  // trained again are drawn once).
  ASSERT_TRUE(wait_until(
      [&] {
        const auto* frame = dashboard->frame();
        return frame && !frame->live && frame->step_records == 2 * 150;
      },
      30s))
      << (dashboard->frame() ? dashboard->frame()->step_records : -1) << " step records";
  save_screenshot(window, "resumed-run");
  controller::Store store(db);
  EXPECT_EQ(store.attempts(run.toStdString()), 2);
  int64_t resumed_from = 0;
  for (const auto& r : store.records(run.toStdString()))
    if (r.type == "start" && r.rank == 0)
      resumed_from = nlohmann::json::parse(r.body).value("resumed_from_step", int64_t{0});
  EXPECT_GE(resumed_from, 10);
  EXPECT_EQ(resumed_from % 5, 0);
}

// A 2-stage GPipe run with a codec between its stages, started from the
// window: while it trains, every panel that applies to a pipeline fills
// (per stage busy and idle share against the bubble, the codec's figures).
TEST(MainWindow, ChartsALivePipelineRunPerStage) {
  testing::TempDir dir;
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir.path() / "agent-home").string()));
  const QString db = QString::fromStdString((dir.path() / "gui.db").string());
  MainWindow window(db, FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  set_form_keys(window, {{"name", "gui-pipeline"},
                         {"strategy", "pipeline"},
                         {"ranks_per_node", "2"},
                         {"batch_size", "16"},
                         {"chunks", "4"},
                         {"compression.method", "uniform"},
                         {"max_steps", "200"},
                         {"threads", "1"}});
  const QString run = press_run(window);
  ASSERT_FALSE(run.isEmpty());
  Dashboard* dashboard = window.dashboard();
  auto series_named = [&](charts::PanelKind kind, const std::string& part) {
    const auto* panel = dashboard->panel(kind)->panel();
    if (!panel) return false;
    for (const auto& s : panel->description.series)
      if (s.name.find(part) != std::string::npos && !s.y->empty()) return true;
    return false;
  };
  // The status line counts the step records the panels draw, at every turn
  // of the event loop, also between two panels of a frame: a screenshot
  // once said "0 step records, live" over panels of 24 steps.
  auto* status = child<QLabel>(*dashboard, "dashboardStatus");  // not the Compare tab's
  ASSERT_TRUE(status);
  int64_t most_checked = 0;
  auto status_counts_what_is_drawn = [&] {
    bool counted = false;
    const int64_t said = status->text().section(' ', 0, 0).toLongLong(&counted);
    const auto* throughput = dashboard->panel(charts::PanelKind::throughput)->panel();
    if (!counted || !throughput) return;
    int64_t drawn = 0;  // each rank's line has a point a step record
    for (const auto& s : throughput->description.series)
      if (s.style == charts::SeriesStyle::thin) drawn += int64_t(s.x->size());
    EXPECT_EQ(said, drawn) << status->text().toStdString();
    most_checked = std::max(most_checked, drawn);
  };
  bool seen_live = false;
  ASSERT_TRUE(wait_turn_by_turn(
      [&] {
        status_counts_what_is_drawn();
        if (HasFailure()) return true;
        const auto* frame = dashboard->frame();
        if (!frame || !frame->live) return false;
        seen_live = series_named(charts::PanelKind::step_time, "stage 0 busy") &&
                    series_named(charts::PanelKind::step_time, "stage 0 idle") &&
                    series_named(charts::PanelKind::step_time, "stage 1 busy") &&
                    series_named(charts::PanelKind::step_time, "stage 1 idle") &&
                    series_named(charts::PanelKind::communication, "compression ratio") &&
                    series_named(charts::PanelKind::throughput, "job") &&
                    series_named(charts::PanelKind::loss, "loss") &&
                    series_named(charts::PanelKind::memory, "RSS");
        return seen_live;
      },
      240s))
      << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(seen_live);
  EXPECT_GT(most_checked, 0);
  const auto& step_time = dashboard->panel(charts::PanelKind::step_time)->panel()->description;
  ASSERT_EQ(step_time.references.size(), 1u);
  // p = 2 stages, m = 4 micro-batches: (p-1)/(m+p-1) = 20 %.
  EXPECT_DOUBLE_EQ(step_time.references[0].y, 20.0);
  EXPECT_TRUE(
      dashboard->panel(charts::PanelKind::bandwidth)->panel()->description.empty_reason.empty());
  save_screenshot(window, "live-pipeline-run");
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "finished"; }, 300s))
      << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
}

TEST(MainWindow, ContinuesOnStartASweepWhoseControllerHasGone) {
  testing::TempDir dir;
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir.path() / "agent-home").string()));
  const QString db = QString::fromStdString((dir.path() / "gui.db").string());
  const auto spec = parse_sweep(R"(
name: left-behind
base:
  model: small_cnn
  dataset: synthetic
  synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 256, test_samples: 16}
  max_steps: 3
  threads: 1
axes:
  batch_size: [16, 32]
)");
  {
    // Stored by a controller of this host that has gone (its process's start
    // time is not this one's), before it ran anything.
    controller::Store store(db);
    controller::SweepStore(store).create(
        spec, expand_sweep(spec), "left-behind.yaml",
        QSysInfo::machineHostName().toStdString() + " " + std::to_string(::getpid()) + " 1 gone");
  }
  std::vector<std::string> runs;
  {
    MainWindow window(db, FLOTILLA_AGENT_BINARY);
    window.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
    controller::Store store(db);
    controller::SweepStore sweeps(store);
    ASSERT_TRUE(wait_until(
        [&] { return sweeps.sweep("left-behind")->state == controller::SweepState::finished; },
        180s))
        << "the window did not finish the sweep";
    for (const auto& point : sweeps.points(sweeps.sweep("left-behind")->id)) {
      EXPECT_EQ(point.state, controller::PointState::finished) << point.reason;
      runs.push_back(point.run_id);
      // Each point's run is listed, as any run the window follows.
      EXPECT_TRUE(wait_until(
          [&] { return window.listedState(QString::fromStdString(point.run_id)) == "finished"; },
          10s))
          << point.run_id;
    }
  }
  controller::Store store(db);
  EXPECT_EQ(store.runs().size(), 2u);
  EXPECT_EQ(runs.size(), 2u);
}

TEST(MainWindow, AsksWithTheFingerprintBeforeTrustingANewHostKeyThenRuns) {
  std::string why;
  if (!testing::TestCluster::available(&why)) GTEST_SKIP() << why;
  testing::TestCluster cluster(1);
  testing::TempDir dir;
  // The window's known_hosts goes under the XDG data directory: this test's own.
  qputenv("XDG_DATA_HOME", QByteArray::fromStdString(dir.path().string()));
  const QString db = QString::fromStdString((dir.path() / "gui.db").string());
  const auto& host = cluster.hosts().at(0);
  {
    controller::Store store(db);
    controller::NodeRow node;
    node.name = host.name;
    node.host = host.address;
    node.user = host.user;
    node.key_file = cluster.key_file().string();
    node.remote_dir = host.remote_dir;
    store.add_node(node);
  }
  const std::string fingerprint =
      testing::shell("ssh-keygen -lf " + host.host_key_pub + " | awk '{print $2}'").second;
  QString asked;
  {
    MainWindow window(db, FLOTILLA_AGENT_BINARY);
    window.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
    set_form_keys(window, {{"name", "gui-remote"},
                           {"nodes", host.name.c_str()},
                           {"max_steps", "20"},
                           {"threads", "1"}});
    ASSERT_TRUE(window.form()->problems().isEmpty())
        << window.form()->problems().join("; ").toStdString();
    // Answers the question box as a person would, once it is up.
    QTimer answer;
    QObject::connect(&answer, &QTimer::timeout, [&] {
      if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
        asked = box->text();
        box->button(QMessageBox::Yes)->click();
      }
    });
    answer.start(50);
    QTest::mouseClick(child<QPushButton>(window, "runButton"), Qt::LeftButton);
    ASSERT_TRUE(wait_until([&] { return !asked.isEmpty(); }, 30s)) << "no question was asked";
    EXPECT_TRUE(asked.contains(QString::fromStdString(fingerprint).trimmed()))
        << asked.toStdString() << " lacks " << fingerprint;
    Dashboard* dashboard = window.dashboard();
    ASSERT_TRUE(wait_until([&] { return dashboard->runs().size() == 1; }, 60s));
    const QString run = dashboard->runs().front();
    ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "finished"; }, 180s))
        << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "flotilla" / "known_hosts"));
  qunsetenv("XDG_DATA_HOME");
}

}  // namespace
}  // namespace flotilla::gui
