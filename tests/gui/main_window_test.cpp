// The main window driven through its own widgets (offscreen in CI, or under
// Xvfb for a screenshot): Run a short experiment, watch the chart fill and
// the run finish.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QGuiApplication>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QTest>
#include <QTimer>
#include <QWindow>
#include <functional>

#include "experiment_designer.h"
#include "flotilla/controller/store.h"
#include "live_chart.h"
#include "main_window.h"
#include "processes.h"
#include "temp_dir.h"
#include "test_cluster.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;

// Keeps the event loop going (the window must stay live) until `done`.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    QTest::qWait(20);
  }
  return true;
}

template <typename T>
T* child(QWidget& parent, const char* name) {
  auto* widget = parent.findChild<T*>(name);
  EXPECT_TRUE(widget) << "no widget " << name;
  return widget;
}

void save_screenshot(QWidget& window) {
  const QByteArray file = qgetenv("FLOTILLA_SCREENSHOT");
  if (file.isEmpty()) return;
  // Under a real X server (Xvfb) take the screen's pixels, as a person sees them.
  const QPixmap shot = QGuiApplication::platformName() == "xcb"
                           ? window.screen()->grabWindow(window.winId())
                           : window.grab();
  EXPECT_TRUE(shot.save(QString::fromLocal8Bit(file))) << file.constData();
}

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
    name->setText("gui-fashion-mnist");
    child<QComboBox>(window, "key:strategy")->setCurrentText("ddp");
    child<QLineEdit>(window, "key:ranks_per_node")->setText("2");
    child<QLineEdit>(window, "key:batch_size")->setText("32");
    child<QLineEdit>(window, "key:max_steps")->setText("120");
    child<QLineEdit>(window, "key:threads")->setText("1");
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
    LiveChart* chart = window.chart();
    ASSERT_TRUE(wait_until([&] { return chart->throughputPoints() >= 20; }, 120s))
        << "the chart got " << chart->sampleCount() << " samples";
    const QString run = chart->run();
    ASSERT_FALSE(run.isEmpty());
    EXPECT_GT(chart->lossPoints(), 0);
    save_screenshot(window);
    ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "finished"; }, 180s))
        << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
    ASSERT_TRUE(wait_until([&] { return chart->sampleCount() == 120; }, 5s))
        << chart->sampleCount() << " samples for 120 steps";
    // Redrawn from the buffer, decimated to the plot's width at most.
    ASSERT_TRUE(wait_until([&] { return chart->throughputPoints() > 20; }, 2s));
    EXPECT_LE(chart->throughputPoints(), 120);
    EXPECT_FALSE(child<QPushButton>(window, "killButton")->isEnabled());
  }
  controller::Store store(db);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, controller::RunState::finished);
  EXPECT_EQ(runs[0].experiment_name, "gui-fashion-mnist");
  ASSERT_TRUE(store.experiment("gui-fashion-mnist"));
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
    child<QLineEdit>(window, "key:name")->setText("gui-remote");
    child<QLineEdit>(window, "key:nodes")->setText(QString::fromStdString(host.name));
    child<QLineEdit>(window, "key:max_steps")->setText("20");
    child<QLineEdit>(window, "key:threads")->setText("1");
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
    LiveChart* chart = window.chart();
    ASSERT_TRUE(wait_until([&] { return !chart->run().isEmpty(); }, 60s));
    const QString run = chart->run();
    ASSERT_TRUE(wait_until([&] { return window.listedState(run) == "finished"; }, 180s))
        << "run " << run.toStdString() << " is " << window.listedState(run).toStdString();
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "flotilla" / "known_hosts"));
  qunsetenv("XDG_DATA_HOME");
}

TEST(LiveChart, DecimatesToTwoPointsAPixelColumnAndKeepsTheExtremes) {
  QVector<QPointF> points;
  for (int i = 0; i < 10000; ++i) points.push_back({double(i), i == 5000 ? 1000.0 : i % 7});
  const auto reduced = LiveChart::decimate(points, 100);
  EXPECT_LE(reduced.size(), 200);
  EXPECT_GE(reduced.size(), 100);
  double highest = 0;
  for (int i = 1; i < reduced.size(); ++i) {
    EXPECT_LE(reduced[i - 1].x(), reduced[i].x());
    highest = std::max(highest, reduced[i].y());
  }
  EXPECT_EQ(highest, 1000.0);  // the spike survives
  EXPECT_EQ(reduced.front(), points.front());
  const QVector<QPointF> few{{0, 1}, {1, 2}};
  EXPECT_EQ(LiveChart::decimate(few, 100), few);
}

}  // namespace
}  // namespace flotilla::gui
