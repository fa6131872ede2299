// The window and the `flotilla` CLI on one database at once, as a person has
// the window open while scripting runs in a terminal: a run the CLI starts
// shows in the window live, charts and all, and a kill from the CLI shows
// there as it happens.
#include <gtest/gtest.h>

#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>

#include "dashboard.h"
#include "dashboard_loader.h"
#include "flotilla/charts/panel_widget.h"
#include "flotilla/controller/store.h"
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

// A SLURM run submitted from the CLI while another job holds the cluster's
// nodes: the window lists it queued with SLURM's reason, then killed.
TEST(WindowBesideTheCli, ListsASlurmRunQueuedBehindAnotherJobWithSlurmsReason) {
  std::string why;
  if (!testing::TestCluster::available(&why, testing::ClusterKind::slurm)) GTEST_SKIP() << why;
  testing::TestCluster cluster(2, testing::ClusterKind::slurm);
  testing::TempDir dir;
  const std::string db = (dir.path() / "shared.db").string();
  auto cli = [&](const std::vector<std::string>& args, const std::string& output) {
    std::vector<std::string> argv{FLOTILLA_CLI_BINARY, "--db", db, "--known-hosts",
                                  (dir.path() / "known_hosts").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<testing::ChildProcess>(argv, dir.path() / output);
  };
  const auto& login = cluster.host("flh1");
  auto added = cli({"nodes", "add", "hpc", "--slurm", "--host", login.address, "--user", login.user,
                    "--key", cluster.key_file().string(), "--remote-dir", login.remote_dir,
                    "--partition", testing::TestCluster::kSlurmPartition},
                   "add.txt");
  ASSERT_EQ(added->wait(60s), 0) << added->output();
  auto probed = cli({"--trust-new-host-key", "nodes", "probe", "hpc"}, "probe.txt");
  ASSERT_EQ(probed->wait(120s), 0) << probed->output();

  MainWindow window(QString::fromStdString(db), FLOTILLA_AGENT_BINARY);
  window.resize(1500, 700);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  // The run list dragged wide, as a person does to read the Reason column.
  window.findChild<QSplitter*>("mainSplitter")->setSizes({820, 680});
  const std::string blocker =
      cluster.ssh("flh1", "sbatch --parsable --nodes=2 --exclusive --wrap 'sleep 600'");
  const auto experiment =
      dir.write("slurm.yaml",
                "name: on-the-cluster\nmodel: small_cnn\ndataset: fashion_mnist\nstrategy: ddp\n"
                "nodes: [hpc]\nslurm: {nodes: 2}\nthreads: 1\nmax_steps: 50\n");
  auto runner = cli({"run", experiment.string()}, "run.txt");
  std::string id;
  ASSERT_TRUE(wait_until([&] { return !(id = only_run(db)).empty(); }, 120s)) << runner->output();
  const QString run = QString::fromStdString(id);
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "queued"; }, 120s))
      << "the window lists " << id << " as \"" << window.listedState(run).toStdString() << "\"";
  auto* table = window.runList()->table();
  QString reason;
  for (int row = 0; row < table->rowCount(); ++row)
    if (table->item(row, RunList::kId)->text() == run) {
      reason = table->item(row, RunList::kReason)->text();
    }
  EXPECT_TRUE(reason.startsWith("SLURM job ") &&
              (reason.endsWith(" waits: Resources") || reason.endsWith(" waits: Priority")))
      << reason.toStdString();
  EXPECT_TRUE(window.findChild<QPushButton*>("killButton") != nullptr);
  window.runList()->select(run);
  EXPECT_TRUE(window.findChild<QPushButton*>("killButton")->isEnabled());
  // Its dashboard says what it waits for.
  window.showRun(run);
  std::string said;
  ASSERT_TRUE(wait_until(
      [&] {
        const auto* frame = window.dashboard()->frame();
        if (!frame || !frame->panels.count(charts::PanelKind::throughput)) return false;
        said = frame->panels.at(charts::PanelKind::throughput)->description.empty_reason;
        return said.find("the run is queued (SLURM job ") != std::string::npos;
      },
      30s))
      << said;
  save_screenshot(window, "slurm-run-queued");

  auto killer = cli({"kill", id}, "kill.txt");
  ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "killed"; }, 60s))
      << "the window lists " << id << " as \"" << window.listedState(run).toStdString() << "\"";
  EXPECT_EQ(killer->wait(60s), 0) << killer->output();
  runner->wait(60s);
  cluster.ssh("flh1", "scancel " + blocker);
}

}  // namespace
}  // namespace flotilla::gui
