// The Nodes tab and remote runs driven through the window's own widgets:
// the node form refuses what the CLI refuses, a node that does not answer is
// marked unreachable with the reason, and on the test cluster three nodes are
// added, trusted, probed, run on and killed with nothing left behind.
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QApplication>
#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFile>
#include <QGuiApplication>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <QTimer>
#include <functional>

#include "dashboard.h"
#include "designer_form.h"
#include "experiment_designer.h"
#include "flotilla/controller/nodes.h"
#include "flotilla/controller/store.h"
#include "main_window.h"
#include "node_dialog.h"
#include "nodes_view.h"
#include "plan_preview.h"
#include "screenshot.h"
#include "temp_dir.h"
#include "test_cluster.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;

// Fills the node dialog the Add button opens, as a person types, and presses OK.
class NodeDialogFiller : public QObject {
 public:
  // `slurm`: the SLURM login node box ticked first, as a person would.
  explicit NodeDialogFiller(QMap<QString, QString> fields, bool slurm = false)
      : fields_(std::move(fields)) {
    connect(&timer_, &QTimer::timeout, this, [this, slurm] {
      auto* dialog = qobject_cast<NodeDialog*>(QApplication::activeModalWidget());
      if (!dialog) return;
      timer_.stop();
      if (slurm) dialog->findChild<QCheckBox*>("node:slurm")->click();
      for (auto it = fields_.begin(); it != fields_.end(); ++it)
        dialog->field(it.key())->setText(it.value());
      problems_ = dialog->problems();
      auto* ok = dialog->findChild<QPushButton*>("nodeOk");
      if (ok->isEnabled())
        ok->click();
      else
        dialog->reject();
      done_ = true;
    });
    timer_.start(30);
  }
  bool done() const { return done_; }
  QStringList problems() const { return problems_; }

 private:
  QMap<QString, QString> fields_;
  QTimer timer_;
  QStringList problems_;
  bool done_ = false;
};

// Answers Yes to every question box while it lives, keeping what was asked.
class QuestionAnswerer : public QObject {
 public:
  QuestionAnswerer() {
    connect(&timer_, &QTimer::timeout, this, [this] {
      if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
        asked_ << box->text();
        box->button(QMessageBox::Yes)->click();
      }
    });
    timer_.start(50);
  }
  const QStringList& asked() const { return asked_; }

 private:
  QTimer timer_;
  QStringList asked_;
};

TEST(NodeDialog, RefusesAHostileNameWithTheValidatorsWordsAtTheField) {
  NodeDialog dialog(std::nullopt);
  dialog.field("name")->setText("gpu;rm -rf ~");
  dialog.field("host")->setText("10.0.0.5");
  EXPECT_FALSE(dialog.findChild<QPushButton*>("nodeOk")->isEnabled());
  EXPECT_TRUE(dialog.messageAt("name").startsWith("name:"))
      << dialog.messageAt("name").toStdString();
  EXPECT_TRUE(dialog.messageAt("host").isEmpty());
  dialog.field("port")->setText("22x");
  EXPECT_TRUE(dialog.messageAt("port").startsWith("port:"))
      << dialog.messageAt("port").toStdString();
  dialog.field("name")->setText("gpu-01");
  dialog.field("port")->setText("2222");
  EXPECT_TRUE(dialog.problems().isEmpty()) << dialog.problems().join("; ").toStdString();
  EXPECT_TRUE(dialog.findChild<QPushButton*>("nodeOk")->isEnabled());
  EXPECT_EQ(dialog.node().port, 2222);
}

TEST(NodeDialog, PartitionAndAccountBelongToASlurmLoginNodeAlone) {
  NodeDialog dialog(std::nullopt);
  dialog.field("name")->setText("hpc");
  dialog.field("host")->setText("login.hpc.example.org");
  auto* slurm = dialog.findChild<QCheckBox*>("node:slurm");
  ASSERT_NE(slurm, nullptr);
  EXPECT_FALSE(dialog.field("partition")->isEnabled());
  slurm->click();
  ASSERT_TRUE(dialog.field("partition")->isEnabled());
  dialog.field("partition")->setText("gpu");
  dialog.field("account")->setText("proj 42");
  EXPECT_TRUE(dialog.messageAt("account").startsWith("account: expected a SLURM account name"))
      << dialog.messageAt("account").toStdString();
  dialog.field("account")->setText("proj42");
  EXPECT_TRUE(dialog.problems().isEmpty()) << dialog.problems().join("; ").toStdString();
  const auto node = dialog.node();
  EXPECT_TRUE(node.slurm);
  EXPECT_EQ(node.slurm_partition, "gpu");
  EXPECT_EQ(node.slurm_account, "proj42");
  // Unticked, the partition typed stays and is refused at its field.
  slurm->click();
  EXPECT_TRUE(dialog.messageAt("partition").startsWith("partition: only a SLURM node"))
      << dialog.messageAt("partition").toStdString();
  EXPECT_FALSE(dialog.findChild<QPushButton*>("nodeOk")->isEnabled());
}

TEST(NodeDialog, ALibTorchToBuildAgainstIsAnAbsolutePathAndShowsInTheEngineColumn) {
  NodeDialog dialog(std::nullopt);
  dialog.field("name")->setText("gpu1");
  dialog.field("host")->setText("10.0.0.7");
  dialog.field("torch")->setText("libtorch");
  EXPECT_TRUE(dialog.messageAt("torch").startsWith("torch: expected the absolute path"))
      << dialog.messageAt("torch").toStdString();
  EXPECT_FALSE(dialog.findChild<QPushButton*>("nodeOk")->isEnabled());
  dialog.field("torch")->setText("/opt/libtorch");
  EXPECT_TRUE(dialog.problems().isEmpty()) << dialog.problems().join("; ").toStdString();
  EXPECT_EQ(dialog.node().torch_prefix, "/opt/libtorch");

  // The view says which engine the node's runs use, and a failed build in red.
  NodesView view;
  NodeItem item = dialog.node();
  item.engine = QString::fromStdString(controller::engine_summary(node_row_of(item)));
  item.probe_json = "{}";
  // A node whose engine was built, beside it.
  controller::NodeRow built_row = node_row_of(item);
  built_row.name = "gpu2";
  built_row.engine_json =
      R"({"path":"/e/flotilla-train","torch_version":"2.5.1","torch_prefix":"/opt/libtorch",)"
      R"("cuda":true})";
  NodeItem built = item;
  built.name = "gpu2";
  built.engine = QString::fromStdString(controller::engine_summary(built_row));
  view.showNodes({item, built});
  EXPECT_EQ(view.cell("gpu1", NodesView::kEngine), "bundled (not built yet)");
  EXPECT_EQ(view.cell("gpu2", NodesView::kEngine),
            "built against LibTorch 2.5.1 (CUDA) at /opt/libtorch");
  view.probe({"gpu1"});
  view.nodeProgress("gpu1", "engine build: [3/58] Building CXX object engine/...");
  EXPECT_EQ(view.cell("gpu1", NodesView::kState),
            "probing: engine build: [3/58] Building CXX object engine/...");
  NodeProbeResult result;
  result.node = "gpu1";
  result.reached = true;
  result.engine_error = "node gpu1: engine build: no LibTorch at /opt/libtorch";
  view.nodeProbed(result);
  EXPECT_EQ(view.cell("gpu1", NodesView::kState),
            "reachable; its engine was not built: node gpu1: engine build: no LibTorch at "
            "/opt/libtorch");
  EXPECT_TRUE(view.findChild<QLabel*>("nodesMessage")
                  ->text()
                  .endsWith("gpu1: its engine was not built: node gpu1: engine build: no "
                            "LibTorch at /opt/libtorch"));
  view.resize(1500, 260);
  view.show();
  save_screenshot(view, "nodes-view-engine");
}

TEST(NodesView, ASlurmLoginNodeIsAddedAndProbedShowingItsCluster) {
  std::string why;
  if (!testing::TestCluster::available(&why, testing::ClusterKind::slurm)) GTEST_SKIP() << why;
  testing::TestCluster cluster(3, testing::ClusterKind::slurm);
  testing::TempDir dir;
  qputenv("XDG_DATA_HOME", QByteArray::fromStdString(dir.path().string()));
  MainWindow window(QString::fromStdString((dir.path() / "slurm.db").string()),
                    FLOTILLA_AGENT_BINARY);
  window.resize(1500, 700);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  NodesView* view = window.nodesView();
  window.tabs()->setCurrentWidget(view);
  const auto& login = cluster.host("flh1");
  NodeDialogFiller filler({{"name", "hpc"},
                           {"host", QString::fromStdString(login.address)},
                           {"user", QString::fromStdString(login.user)},
                           {"key_file", QString::fromStdString(cluster.key_file().string())},
                           {"remote_dir", QString::fromStdString(login.remote_dir)},
                           {"partition", "debug"}},
                          /*slurm=*/true);
  QTest::mouseClick(window.findChild<QPushButton*>("addNodeButton"), Qt::LeftButton);
  ASSERT_TRUE(wait_until([&] { return filler.done(); }, 10s));
  ASSERT_TRUE(filler.problems().isEmpty()) << filler.problems().join("; ").toStdString();
  ASSERT_TRUE(wait_until([&] { return !view->cell("hpc", NodesView::kName).isEmpty(); }, 10s));
  EXPECT_EQ(view->cell("hpc", NodesView::kCluster), "SLURM (not probed yet)");
  {
    QuestionAnswerer answerer;
    QTest::mouseClick(window.findChild<QPushButton*>("probeAllButton"), Qt::LeftButton);
    ASSERT_TRUE(
        wait_until([&] { return view->cell("hpc", NodesView::kState) == "reachable"; }, 120s))
        << view->cell("hpc", NodesView::kState).toStdString();
    // The row reads reachable as the answer comes; the stored probe, and
    // with it the Cluster cell, follows with the refreshed list.
    ASSERT_TRUE(wait_until(
        [&] { return view->cell("hpc", NodesView::kCluster) != "SLURM (not probed yet)"; }, 30s));
  }
  EXPECT_TRUE(view->cell("hpc", NodesView::kCluster).startsWith("SLURM 22.05"))
      << view->cell("hpc", NodesView::kCluster).toStdString();
  EXPECT_TRUE(view->cell("hpc", NodesView::kCluster).endsWith("debug* 3 nodes (3 idle, no GPU)"))
      << view->cell("hpc", NodesView::kCluster).toStdString();
  save_screenshot(window, "nodes-view-slurm");
}

// The round of a probe stays open while a person decides on a node's host
// key: another node answering under the question must not end it saying
// the first is unreachable, when its probe goes on once trusted.
TEST(NodesView, AnAnswerArrivingWhileAHostKeyIsAskedAboutDoesNotEndTheRound) {
  NodesView view;
  QVector<NodeItem> nodes(2);
  nodes[0].name = "hpc";
  nodes[1].name = "local";
  view.showNodes(nodes);
  view.probe({"hpc", "local"});
  auto* message = view.findChild<QLabel*>("nodesMessage");
  ASSERT_NE(message, nullptr);
  // Answers the question only after `local`'s answer came in under it.
  QTimer answer;
  bool asked = false;
  QObject::connect(&answer, &QTimer::timeout, [&] {
    auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
    if (!box) return;
    answer.stop();
    asked = true;
    NodeProbeResult local;
    local.node = "local";
    local.reached = true;
    view.nodeProbed(local);
    EXPECT_TRUE(view.probing()) << "the round ended under the question";
    box->button(QMessageBox::Yes)->click();
  });
  answer.start(20);
  NodeProbeResult unknown;
  unknown.node = "hpc";
  unknown.host_key = NodeProbeResult::HostKey::unknown;
  unknown.fingerprint = "SHA256:abc";
  view.nodeProbed(unknown);  // asks, modal, until the timer answers
  ASSERT_TRUE(asked);
  EXPECT_TRUE(view.probing());
  NodeProbeResult trusted;
  trusted.node = "hpc";
  trusted.reached = true;
  view.nodeProbed(trusted);
  EXPECT_FALSE(view.probing());
  EXPECT_EQ(message->text(), "Every node answered.");
}

TEST(NodesView, ANodeThatDoesNotAnswerIsMarkedUnreachableWithTheReason) {
  testing::TempDir dir;
  MainWindow window(QString::fromStdString((dir.path() / "nodes.db").string()),
                    FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  NodesView* view = window.nodesView();
  window.tabs()->setCurrentWidget(view);
  // Nothing listens on port 1 of this machine: the connection is refused.
  NodeDialogFiller filler({{"name", "nowhere"}, {"host", "127.0.0.1"}, {"port", "1"}});
  QTest::mouseClick(window.findChild<QPushButton*>("addNodeButton"), Qt::LeftButton);
  ASSERT_TRUE(wait_until([&] { return filler.done(); }, 10s));
  ASSERT_TRUE(
      wait_until([&] { return view->cell("nowhere", NodesView::kName) == "nowhere"; }, 10s));
  EXPECT_EQ(view->cell("nowhere", NodesView::kState), "never probed");
  EXPECT_EQ(view->cell("nowhere", NodesView::kHost), "127.0.0.1:1");

  for (int row = 0; row < view->table()->rowCount(); ++row)
    if (view->table()->item(row, NodesView::kName)->text() == "nowhere")
      view->table()->selectRow(row);
  ASSERT_EQ(view->selectedNodes(), QStringList{"nowhere"});
  auto* probe = window.findChild<QPushButton*>("probeSelectedButton");
  ASSERT_TRUE(probe->isEnabled());
  QTest::mouseClick(probe, Qt::LeftButton);
  EXPECT_EQ(view->cell("nowhere", NodesView::kState), "probing…");
  ASSERT_TRUE(wait_until([&] { return !view->probing(); }, 60s));
  const QString state = view->cell("nowhere", NodesView::kState);
  EXPECT_TRUE(state.startsWith("unreachable: ")) << state.toStdString();
  EXPECT_GT(state.size(), QString("unreachable: ").size() + 5) << "no reason given";
  EXPECT_TRUE(view->cell("nowhere", NodesView::kProbed).isEmpty());
}

TEST(NodesView, AddsTrustsProbesThreeNodesThenRunsAndKillsA3NodeDdpRun) {
  std::string why;
  if (!testing::TestCluster::available(&why)) GTEST_SKIP() << why;
  testing::TestCluster cluster(3);
  testing::TempDir dir;
  qputenv("XDG_DATA_HOME", QByteArray::fromStdString(dir.path().string()));
  {
    MainWindow window(QString::fromStdString((dir.path() / "cluster.db").string()),
                      FLOTILLA_AGENT_BINARY);
    window.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
    NodesView* view = window.nodesView();
    window.tabs()->setCurrentWidget(view);

    QStringList names;
    for (const auto& host : cluster.hosts()) {
      NodeDialogFiller filler({{"name", QString::fromStdString(host.name)},
                               {"host", QString::fromStdString(host.address)},
                               {"user", QString::fromStdString(host.user)},
                               {"key_file", QString::fromStdString(cluster.key_file().string())},
                               {"remote_dir", QString::fromStdString(host.remote_dir)}});
      QTest::mouseClick(window.findChild<QPushButton*>("addNodeButton"), Qt::LeftButton);
      ASSERT_TRUE(wait_until([&] { return filler.done(); }, 10s));
      ASSERT_TRUE(filler.problems().isEmpty()) << filler.problems().join("; ").toStdString();
      names << QString::fromStdString(host.name);
    }
    ASSERT_TRUE(wait_until(
        [&] {
          return std::all_of(names.begin(), names.end(), [&](const QString& n) {
            return !view->cell(n, NodesView::kName).isEmpty();
          });
        },
        10s));

    {
      QuestionAnswerer answerer;
      QTest::mouseClick(window.findChild<QPushButton*>("probeAllButton"), Qt::LeftButton);
      ASSERT_TRUE(wait_until(
          [&] {
            return std::all_of(names.begin(), names.end(), [&](const QString& n) {
              return view->cell(n, NodesView::kState) == "reachable" &&
                     !view->cell(n, NodesView::kCpus).isEmpty();
            });
          },
          120s))
          << view->cell(names[0], NodesView::kState).toStdString() << " / "
          << view->cell(names[1], NodesView::kState).toStdString() << " / "
          << view->cell(names[2], NodesView::kState).toStdString();
      // One question per node, each with that node's fingerprint.
      ASSERT_EQ(answerer.asked().size(), 3) << answerer.asked().join("\n").toStdString();
      for (const auto& host : cluster.hosts()) {
        const std::string fingerprint =
            testing::shell("ssh-keygen -lf " + host.host_key_pub + " | awk '{print $2}'").second;
        const QString expected = QString::fromStdString(fingerprint).trimmed();
        EXPECT_TRUE(std::any_of(answerer.asked().begin(), answerer.asked().end(),
                                [&](const QString& q) {
                                  return q.contains(QString::fromStdString(host.name)) &&
                                         q.contains(expected);
                                }))
            << host.name << " was not asked about with " << fingerprint;
      }
    }
    EXPECT_EQ(view->cell(names[0], NodesView::kGpus), "none");
    EXPECT_FALSE(view->cell(names[0], NodesView::kProbed).isEmpty());
    view->table()->clearSelection();
    save_screenshot(window, "nodes-view");

    // A 3-node DDP run from the designer, long enough to be killed.
    window.tabs()->setCurrentIndex(0);
    ExperimentDesigner* designer = window.form();
    ASSERT_TRUE(
        designer->setConfigText("name: cluster-ddp\nmodel: small_cnn\ndataset: synthetic\n"
                                "synthetic: {shape: [1, 28, 28], train_samples: 60000}\n"
                                "strategy: ddp\nnodes: [" +
                                names.join(", ") +
                                "]\nranks_per_node: 1\nbatch_size: 16\nthreads: 1\n"
                                "epochs: 50\n"));
    ASSERT_TRUE(designer->problems().isEmpty()) << designer->problems().join("; ").toStdString();
    auto* run_button = window.findChild<QPushButton*>("runButton");
    ASSERT_TRUE(run_button->isEnabled());
    QTest::mouseClick(run_button, Qt::LeftButton);
    Dashboard* dashboard = window.dashboard();
    ASSERT_TRUE(wait_until([&] { return !dashboard->runs().isEmpty(); }, 60s));
    const QString run = dashboard->runs().front();
    ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "running"; }, 120s))
        << window.listedState(run).toStdString();
    ASSERT_TRUE(wait_until(
        [&] {
          const auto* frame = dashboard->frame();
          return frame && frame->step_records > 0;
        },
        120s));
    for (const auto& host : cluster.hosts()) {
      bool training = false;
      for (const auto& [pid, command] : cluster.processes_on(host.name))
        training |= command.find("flotilla-train") != std::string::npos;
      EXPECT_TRUE(training) << "no flotilla-train on " << host.name;
    }

    {
      QuestionAnswerer answerer;
      auto* kill = window.findChild<QPushButton*>("killButton");
      ASSERT_TRUE(kill->isEnabled());
      QTest::mouseClick(kill, Qt::LeftButton);
      ASSERT_TRUE(wait_until([&] { return !answerer.asked().isEmpty(); }, 10s));
      EXPECT_TRUE(answerer.asked().front().contains(run)) << answerer.asked().front().toStdString();
      ASSERT_TRUE(wait_until([&] { return window.listedState(run) != "running"; }, 10s));
      EXPECT_EQ(window.listedState(run), "killing…");
      EXPECT_FALSE(kill->isEnabled());
      ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "killed"; }, 120s))
          << window.listedState(run).toStdString();
    }
    // Killed means no training process is left on any host.
    for (const auto& host : cluster.hosts())
      for (const auto& [pid, command] : cluster.processes_on(host.name))
        EXPECT_EQ(command.find("flotilla-train"), std::string::npos)
            << host.name << " still runs " << command;
    save_screenshot(window, "killed-run");
  }
  // With the window closed its agents' SSH sessions end, and the agents with them.
  const auto flotilla_processes = [&] {
    std::string left;
    for (const auto& host : cluster.hosts())
      for (const auto& [pid, command] : cluster.processes_on(host.name))
        if (command.find("flotilla-agent") != std::string::npos ||
            command.find("flotilla-train") != std::string::npos)
          left += host.name + ": " + command + "\n";
    return left;
  };
  EXPECT_TRUE(wait_until([&] { return flotilla_processes().empty(); }, 30s))
      << flotilla_processes();
  qunsetenv("XDG_DATA_HOME");
}

TEST(NodesView, AChangedHostKeyIsShownAsARefusalNamingTheNodeAndIsNeverTrusted) {
  std::string why;
  if (!testing::TestCluster::available(&why)) GTEST_SKIP() << why;
  testing::TestCluster cluster(1);
  testing::TempDir dir;
  qputenv("XDG_DATA_HOME", QByteArray::fromStdString(dir.path().string()));
  const auto& host = cluster.hosts().at(0);
  const QString db = QString::fromStdString((dir.path() / "rekey.db").string());
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
  const auto fingerprint = [&] {
    return QString::fromStdString(
               testing::shell("ssh-keygen -lf " + host.host_key_pub + " | awk '{print $2}'").second)
        .trimmed();
  };
  const QString name = QString::fromStdString(host.name);
  const auto known_hosts = dir.path() / "flotilla" / "known_hosts";
  const auto read_known_hosts = [&] {
    QFile f(QString::fromStdString(known_hosts.string()));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  };
  QByteArray trusted;
  {
    MainWindow window(db, FLOTILLA_AGENT_BINARY);
    window.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
    NodesView* view = window.nodesView();
    window.tabs()->setCurrentWidget(view);
    ASSERT_TRUE(wait_until([&] { return !view->cell(name, NodesView::kName).isEmpty(); }, 10s));
    const QString first_key = fingerprint();
    {
      QuestionAnswerer answerer;  // trusts the key it is first shown, as a person who checked it
      view->probe({name});
      ASSERT_TRUE(wait_until(
          [&] { return !view->probing() && view->cell(name, NodesView::kState) == "reachable"; },
          120s))
          << view->cell(name, NodesView::kState).toStdString();
      ASSERT_EQ(answerer.asked().size(), 1);
      EXPECT_TRUE(answerer.asked().front().contains(first_key));
    }
    trusted = read_known_hosts();
    ASSERT_FALSE(trusted.isEmpty());

    // The host is reinstalled (or someone is in between): a new key.
    cluster.rekey(host.name);
    const QString new_key = fingerprint();
    ASSERT_NE(new_key, first_key);
    QStringList shown;
    bool offered_trust = false;
    QTimer watcher;
    QObject::connect(&watcher, &QTimer::timeout, [&] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (!box) return;
      shown << box->windowTitle() + "\n" + box->text();
      offered_trust |= box->button(QMessageBox::Yes) != nullptr;
      box->buttons().front()->click();
    });
    watcher.start(30);
    view->probe({name});
    ASSERT_TRUE(wait_until([&] { return !view->probing() && !shown.isEmpty(); }, 120s));
    QTest::qWait(300);  // a second box, if one were coming, would be up by now
    watcher.stop();
    ASSERT_EQ(shown.size(), 1) << shown.join("\n---\n").toStdString();
    EXPECT_FALSE(offered_trust) << "a changed key must not be offered for trust";
    EXPECT_TRUE(shown.front().contains(name)) << shown.front().toStdString();
    EXPECT_TRUE(shown.front().contains(new_key)) << shown.front().toStdString();
    EXPECT_TRUE(shown.front().contains("recorded " + first_key)) << shown.front().toStdString();
    EXPECT_TRUE(shown.front().contains("CHANGED") || shown.front().contains("changed"));
    const QString state = view->cell(name, NodesView::kState);
    EXPECT_TRUE(state.startsWith("unreachable: refused")) << state.toStdString();
    EXPECT_TRUE(state.contains(new_key)) << state.toStdString();
    save_screenshot(window, "changed-host-key");
  }
  // Nothing was trusted silently: the recorded key is still the first one.
  EXPECT_EQ(read_known_hosts(), trusted);
  qunsetenv("XDG_DATA_HOME");
}

TEST(Designer, PipelineDdpWithCompressionAndItsPlanPreview) {
  testing::TempDir dir;
  MainWindow window(QString::fromStdString((dir.path() / "designer.db").string()),
                    FLOTILLA_AGENT_BINARY);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  ExperimentDesigner* designer = window.form();
  ASSERT_TRUE(designer->setConfigText(
      "name: resnet18-pipeline-ddp\nmodel: resnet18\ndataset: synthetic\n"
      "strategy: pipeline_ddp\nnodes: [local]\nranks_per_node: 4\nreplicas: 2\n"
      "chunks: 4\nbalance: [4, 6]\nschedule: 1f1b\nbatch_size: 32\n"
      "compression: {method: sort_quant, bits: 6, split_bits: 2}\n"));
  ASSERT_TRUE(designer->problems().isEmpty()) << designer->problems().join("; ").toStdString();
  EXPECT_TRUE(designer->form()->rowShown("compression.split_bits"));
  EXPECT_TRUE(designer->form()->rowShown("replicas"));
  PlanPreview* plan = designer->planPreview();
  ASSERT_TRUE(wait_until(
      [&] {
        return plan->state() == PlanPreview::State::shown ||
               plan->state() == PlanPreview::State::unavailable ||
               plan->state() == PlanPreview::State::failed;
      },
      60s));
  // The preview shows the engine's numbers, or says plainly that this
  // flotilla-train has no plan mode: never a number of its own.
  if (plan->state() == PlanPreview::State::unavailable) {
    EXPECT_TRUE(plan->statusText().contains("flotilla-train --plan"))
        << plan->statusText().toStdString();
    EXPECT_TRUE(plan->shownText().isEmpty());
  } else {
    EXPECT_EQ(plan->state(), PlanPreview::State::shown) << plan->statusText().toStdString();
    EXPECT_EQ(plan->numbers().stages, 2);
    EXPECT_EQ(plan->numbers().replicas, 2);
  }
  // The compression group in view, as a person scrolls to it.
  auto* scroll = designer->findChild<QScrollArea*>("formScroll");
  scroll->ensureWidgetVisible(designer->findChild<QWidget*>("key:compression.split_bits"), 0, 300);
  save_screenshot(window, "designer");
}

}  // namespace
}  // namespace flotilla::gui
