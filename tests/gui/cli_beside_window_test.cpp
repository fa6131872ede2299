// The window and the `flotilla` CLI on one database at once, as a person has
// the window open while scripting runs in a terminal: a run the CLI starts
// shows in the window live, charts and all, and a kill from the CLI shows
// there as it happens.
#include <gtest/gtest.h>

#include <QPushButton>
#include <QTabWidget>
#include <QTest>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>

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

// The only run in the database, empty while there is none. The window's
// worker creates and migrates the database as the test starts: until it is
// done, a read-only store refuses the file (no schema yet), which is "no
// run yet" here, not a failure.
std::string only_run(const std::string& db) {
  if (!std::filesystem::exists(db)) return {};
  try {
    controller::Store store(QString::fromStdString(db), controller::StoreAccess::read_only);
    const auto runs = store.runs();
    return runs.size() == 1 ? runs.front().id : std::string();
  } catch (const controller::StoreError&) {
    return {};
  }
}

// Whatever the test leaves running when it fails (its run's supervisor lives
// on by design when the controller goes, and would train on for 50 epochs
// after the test): SIGKILLed, the agent home's processes by their command
// line. Declared before the temp folder, so it runs while the folder is there.
struct LeftRunsKiller {
  std::filesystem::path agent_home;
  ~LeftRunsKiller() {
    for (const char* program : {"flotilla-agent", "flotilla-train"})
      for (const pid_t pid : testing::live_processes_with({program, agent_home.string()}))
        ::kill(pid, SIGKILL);
  }
};

TEST(WindowBesideTheCli, ShowsARunStartedFromTheCliLiveAndItsKillFromTheCli) {
  testing::TempDir dir;
  const LeftRunsKiller left_runs{dir.path() / "agent-home"};
  const std::string db = (dir.path() / "shared.db").string();
  const std::vector<std::string> env{"FLOTILLA_HOME=" + (dir.path() / "agent-home").string()};
  auto cli = [&](const std::vector<std::string>& args, const std::string& output) {
    std::vector<std::string> argv{FLOTILLA_CLI_BINARY, "--db", db};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<testing::ChildProcess>(argv, dir.path() / output, env);
  };
  const auto experiment = dir.write("cli.yaml", [] {
    std::ifstream in(std::string(FLOTILLA_PRESETS_DIR) + "/fashion_mnist_small_cnn.yaml");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }() + "\nname: from-the-cli\nstrategy: ddp\nranks_per_node: 2\nthreads: 1\nepochs: 50\n");

  // The window is open first, with a controller of its own, on the database
  // the CLI is about to use.
  MainWindow window(QString::fromStdString(db), FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));

  auto runner = cli({"run", experiment.string()}, "run.txt");
  std::string id;
  ASSERT_TRUE(wait_until([&] { return !(id = only_run(db)).empty(); }, 120s)) << runner->output();
  const QString run = QString::fromStdString(id);
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "running"; }, 120s))
      << "the window lists " << id << " as \"" << window.listedState(run).toStdString() << "\"";

  // Live: its dashboard charts steps of both ranks as they come.
  window.showRun(run);
  Dashboard* dashboard = window.dashboard();
  EXPECT_EQ(window.tabs()->currentWidget(), dashboard);
  ASSERT_TRUE(wait_until(
      [&] {
        const auto* frame = dashboard->frame();
        return frame && frame->live && frame->step_records >= 2 * 20;
      },
      120s))
      << "no live frame of the CLI's run with 20 steps of both ranks";
  const int64_t first_steps = dashboard->frame()->step_records;
  ASSERT_TRUE(wait_until(
      [&] { return dashboard->frame() && dashboard->frame()->step_records > first_steps; }, 60s))
      << "the dashboard did not follow the run past " << first_steps << " steps";
  save_screenshot(window, "cli-run-live-in-window");

  // Killed from the CLI: the window shows it, and the run's last frame is not live.
  const auto kill_sent = std::chrono::steady_clock::now();
  auto killer = cli({"kill", id, "--grace", "3"}, "kill.txt");
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "killed"; }, 60s))
      << "the window lists " << id << " as \"" << window.listedState(run).toStdString() << "\"";
  const double kill_shown_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - kill_sent).count();
  ASSERT_TRUE(wait_until([&] { return dashboard->frame() && !dashboard->frame()->live; }, 30s));
  EXPECT_FALSE(window.findChild<QPushButton*>("killButton")->isEnabled());
  save_screenshot(window, "cli-kill-in-window");
  EXPECT_EQ(killer->wait(60s), 0) << killer->output();
  EXPECT_EQ(runner->wait(60s), 4) << runner->output();
  EXPECT_TRUE(testing::live_processes_with({"flotilla-train", "--config", id}).empty());
  std::cout << "the window showed the CLI's kill " << kill_shown_s
            << " s after `flotilla kill` started\n";
}

}  // namespace
}  // namespace flotilla::gui
