// How long the window's thread takes to answer, measured from outside the
// process as a window manager does (issue 22): the real window on a real X
// server (Xvfb: tests/bench/window_latency.sh runs this at QT_SCALE_FACTOR=1
// and 2), two fast local DDP runs started from the window itself (small_cnn,
// batch 4, 2 ranks each, so its local agent runs as a window's does), and a
// child process that sends the window a _NET_WM_PING every 50 ms and times
// each answer; Qt answers on the window's thread. Printed, never asserted:
// p50, p99 and max of the round trips for each tab measured (the dashboard of
// a live run, the Compare tab on four runs of which two are live, the Sweeps
// tab, and on request the Nodes tab with its live runs). Goal: p99 <= 50 ms, max <= 200 ms.
//
// Usage (under X, QT_QPA_PLATFORM=xcb):
//   window_latency [--seconds S] [--tabs dashboard,compare,sweeps,nodes] [--shots DIR]
//   window_latency --ping WINDOW SECONDS   (the outside measurer; prints one round trip a line)
#include <QApplication>
#include <QElapsedTimer>
#include <QEvent>
#include <QMetaEnum>
#include <QProcess>
#include <QScreen>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <QWindow>

#include <xcb/xcb.h>
#include <nlohmann/json.hpp>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compare_view.h"
#include "dashboard.h"
#include "flotilla/controller/paths.h"
#include "main_window.h"
#include "nodes_view.h"
#include "sweep_view.h"

namespace {

using Clock = std::chrono::steady_clock;

xcb_atom_t atom(xcb_connection_t* c, const char* name) {
  auto* reply =
      xcb_intern_atom_reply(c, xcb_intern_atom(c, 0, uint16_t(std::strlen(name)), name), nullptr);
  const xcb_atom_t a = reply ? reply->atom : xcb_atom_t(XCB_ATOM_NONE);
  free(reply);
  return a;
}

// The measurer: pings `window` every 50 ms for `seconds` and prints each
// round trip in ms, one a line; pings never answered are printed as "lost".
int ping(xcb_window_t window, double seconds) {
  xcb_connection_t* c = xcb_connect(nullptr, nullptr);
  if (xcb_connection_has_error(c)) {
    std::fprintf(stderr, "window_latency --ping: cannot connect to the X server\n");
    return 1;
  }
  const xcb_screen_t* screen = xcb_setup_roots_iterator(xcb_get_setup(c)).data;
  const xcb_atom_t protocols = atom(c, "WM_PROTOCOLS"), net_wm_ping = atom(c, "_NET_WM_PING");
  // Qt sends its answer to the root window (as to a window manager).
  const uint32_t mask = XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY | XCB_EVENT_MASK_STRUCTURE_NOTIFY;
  xcb_change_window_attributes(c, screen->root, XCB_CW_EVENT_MASK, &mask);
  xcb_flush(c);
  std::map<uint32_t, Clock::time_point> sent;
  uint32_t next = 1;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  auto due = start;
  while (Clock::now() < end) {
    const auto now = Clock::now();
    if (now >= due) {
      xcb_client_message_event_t event{};
      event.response_type = XCB_CLIENT_MESSAGE;
      event.format = 32;
      event.window = window;
      event.type = protocols;
      event.data.data32[0] = net_wm_ping;
      event.data.data32[1] = XCB_CURRENT_TIME;  // Qt keeps the newest server time it saw
      event.data.data32[2] = window;
      event.data.data32[3] = next;  // echoed back: which ping this is
      xcb_send_event(c, 0, window, XCB_EVENT_MASK_NO_EVENT, reinterpret_cast<const char*>(&event));
      xcb_flush(c);
      sent[next++] = now;
      due += std::chrono::milliseconds(50);
    }
    pollfd fd{xcb_get_file_descriptor(c), POLLIN, 0};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(due - Clock::now());
    ::poll(&fd, 1, int(std::max<int64_t>(0, wait.count())));
    while (auto* e = xcb_poll_for_event(c)) {
      if ((e->response_type & 0x7f) == XCB_CLIENT_MESSAGE) {
        const auto* m = reinterpret_cast<const xcb_client_message_event_t*>(e);
        const auto it = sent.find(m->data.data32[3]);
        if (m->data.data32[0] == net_wm_ping && it != sent.end()) {
          std::printf("%.3f\n",
                      std::chrono::duration<double, std::milli>(Clock::now() - it->second).count());
          sent.erase(it);
        }
      }
      free(e);
    }
    if (xcb_connection_has_error(c)) break;
  }
  // Pings still unanswered at the end count as lost (their wait is at least
  // the time since they were sent).
  for (const auto& [id, at] : sent)
    std::printf("lost %.3f\n",
                std::chrono::duration<double, std::milli>(Clock::now() - at).count());
  std::fflush(stdout);
  xcb_disconnect(c);
  return 0;
}

std::string run_config(const std::string& name, int max_steps) {
  return nlohmann::json{{"name", name},        {"model", "small_cnn"}, {"strategy", "ddp"},
                        {"ranks_per_node", 2}, {"batch_size", 4},      {"max_steps", max_steps},
                        {"threads", 1}}
      .dump();
}

// Sleeps in the event loop between checks: processEvents without
// WaitForMoreEvents returns at once when nothing is pending, and spinning on
// it kept the window's thread busy (half its time was spent waiting for a CPU
// behind that spin, which the measured round trips then counted).
void wait_until(const std::function<bool()>& done, int limit_ms) {
  QElapsedTimer t;
  t.start();
  QTimer tick;
  tick.start(20);
  while (!done() && t.elapsed() < limit_ms)
    QApplication::processEvents(QEventLoop::WaitForMoreEvents);
}

struct Result {
  size_t answered = 0, lost = 0;
  double p50 = 0, p99 = 0, max = 0;
};

// Runs the measurer on `window` for `seconds` while this process's event
// loop goes on (the window must be live to answer).
Result measure(const QString& self, WId window, double seconds) {
  QProcess child;
  child.start(self, {"--ping", QString::number(window), QString::number(seconds)});
  wait_until([&] { return child.state() == QProcess::NotRunning; }, int(seconds * 1000) + 30000);
  Result r;
  std::vector<double> trips;
  for (const auto& line : QString::fromLatin1(child.readAllStandardOutput()).split('\n')) {
    if (line.startsWith("lost ")) {
      ++r.lost;
      trips.push_back(line.mid(5).toDouble());
    } else if (!line.isEmpty()) {
      ++r.answered;
      trips.push_back(line.toDouble());
    }
  }
  std::sort(trips.begin(), trips.end());
  if (!trips.empty()) {
    r.p50 = trips[trips.size() / 2];
    r.p99 = trips[std::min(trips.size() - 1, size_t(double(trips.size()) * 0.99))];
    r.max = trips.back();
  }
  return r;
}

// The window thread's event handlers, timed: where a round trip's wait
// comes from. Only outermost deliveries are timed (a handler's nested events
// are part of it); a timer's event is named after the timer's owner.
class TimedApplication : public QApplication {
 public:
  using QApplication::QApplication;

  bool notify(QObject* receiver, QEvent* event) override {
    if (QThread::currentThread() != thread()) return QApplication::notify(receiver, event);
    if (depth_ > 0 && event->type() == QEvent::Paint) {
      // Which widgets' paints a slow handler was made of.
      ++depth_;
      const auto started = Clock::now();
      const bool handled = QApplication::notify(receiver, event);
      if (const double ms =
              std::chrono::duration<double, std::milli>(Clock::now() - started).count();
          ms > kBudgetMs)
        note(receiver, "Paint (inside)", ms);
      --depth_;
      return handled;
    }
    if (depth_ > 0) return QApplication::notify(receiver, event);
    ++depth_;
    const auto started = Clock::now();
    const auto type = event->type();
    const bool handled = QApplication::notify(receiver, event);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    --depth_;
    if (ms > kBudgetMs) {  // names only for the slow ones: this runs for every event
      const char* type_name =
          QEvent::staticMetaObject.enumerator(QEvent::staticMetaObject.indexOfEnumerator("Type"))
              .valueToKey(type);
      note(receiver, type_name ? type_name : std::to_string(int(type)), ms);
    }
    return handled;
  }

  void note(const QObject* receiver, const std::string& what, double ms) {
    const QObject* named = receiver;
    if (named && qobject_cast<const QTimer*>(named) && named->parent()) named = named->parent();
    auto& slow = slow_[std::string(named ? named->metaObject()->className() : "?") + " " + what];
    ++slow.count;
    slow.total_ms += ms;
    slow.max_ms = std::max(slow.max_ms, ms);
  }

  // Prints the handlers over budget since the last call, slowest first.
  void report_and_reset() {
    std::vector<std::pair<std::string, Slow>> sorted(slow_.begin(), slow_.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second.max_ms > b.second.max_ms; });
    size_t over = 0;
    for (const auto& [name, slow] : sorted)
      if (name.find("(inside)") == std::string::npos) over += slow.count;
    std::printf("    handlers over %.0f ms: %zu\n", kBudgetMs, over);
    for (size_t i = 0; i < std::min<size_t>(10, sorted.size()); ++i)
      std::printf("      %-48s %4zu x  max %6.1f ms  total %7.1f ms\n", sorted[i].first.c_str(),
                  sorted[i].second.count, sorted[i].second.max_ms, sorted[i].second.total_ms);
    slow_.clear();
  }
  void forget_slow_handlers() { slow_.clear(); }

 private:
  static constexpr double kBudgetMs = 16;
  struct Slow {
    size_t count = 0;
    double total_ms = 0, max_ms = 0;
  };
  int depth_ = 0;
  std::map<std::string, Slow> slow_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--ping") == 0)
    return ping(xcb_window_t(std::stoul(argv[2])), std::stod(argv[3]));
  TimedApplication app(argc, argv);
  double seconds = 45;
  QStringList tabs{"dashboard", "compare", "sweeps"};
  QString shots;
  const QStringList args = app.arguments();
  for (int i = 1; i + 1 < args.size(); i += 2) {
    if (args[i] == "--seconds")
      seconds = args[i + 1].toDouble();
    else if (args[i] == "--tabs")
      tabs = args[i + 1].split(',');
    else if (args[i] == "--shots")
      shots = args[i + 1];
  }
  if (QGuiApplication::platformName() != "xcb") {
    std::fprintf(stderr,
                 "window_latency needs an X server (QT_QPA_PLATFORM=xcb): see window_latency.sh\n");
    return 2;
  }
  QTemporaryDir dir;
  qputenv("FLOTILLA_HOME", (dir.path() + "/home").toUtf8());
  const QString db = dir.path() + "/latency.db";
  const QString scale = qEnvironmentVariable("QT_SCALE_FACTOR", "1");
  flotilla::gui::MainWindow window(db, flotilla::controller::sibling_program("flotilla-agent"));
  const QRect screen = window.screen()->availableGeometry();
  window.setGeometry(screen);
  window.show();
  wait_until([&] { return window.isVisible() && window.windowHandle()->isExposed(); }, 10000);
  auto* dashboard = window.dashboard();

  // Two short finished runs first, for the Compare tab's four.
  QStringList runs;
  auto start_run = [&](const std::string& name, int steps) {
    const int before = int(runs.size());
    emit window.requestStart(QString::fromStdString(run_config(name, steps)));
    wait_until(
        [&] { return dashboard->runs().size() == 1 && !runs.contains(dashboard->runs().front()); },
        60000);
    if (dashboard->runs().size() == 1 && !runs.contains(dashboard->runs().front()))
      runs << dashboard->runs().front();
    return int(runs.size()) > before;
  };
  if (tabs.contains("compare")) {
    for (const char* name : {"done-a", "done-b"})
      if (!start_run(name, 40)) return std::fprintf(stderr, "run %s did not start\n", name), 1;
    wait_until(
        [&] {
          return window.listedState(runs[0]) == "finished" &&
                 window.listedState(runs[1]) == "finished";
        },
        300000);
  }
  for (const char* name : {"fast-a", "fast-b"})
    if (!start_run(name, 1000000)) return std::fprintf(stderr, "run %s did not start\n", name), 1;
  const QString live = runs.back();
  window.showRun(live);
  // Streaming: both live runs' records arrive and the dashboard follows.
  wait_until([&] { return dashboard->frame() && dashboard->frame()->step_records > 200; }, 120000);
  std::printf("window_latency: QT_SCALE_FACTOR=%s, screen %dx%d (device %dx%d), %g s a tab\n",
              qPrintable(scale), screen.width(), screen.height(),
              int(screen.width() * window.devicePixelRatioF()),
              int(screen.height() * window.devicePixelRatioF()), seconds);
  for (const auto& tab : tabs) {
    if (tab == "dashboard") {
      window.tabs()->setCurrentWidget(dashboard);
      window.showRun(live);
    } else if (tab == "compare") {
      window.compareRuns(runs);
    } else if (tab == "sweeps") {
      window.tabs()->setCurrentWidget(window.sweepView());
    } else if (tab == "nodes") {  // its live-runs column follows the streaming runs
      window.tabs()->setCurrentWidget(window.nodesView());
    }
    wait_until([] { return false; }, 2000);  // the tab's first paint
    app.forget_slow_handlers();
    auto* drawing = tab == "compare" ? window.compareView()->charts() : dashboard;
    drawing->resetDrawCosts();
    const int frames_before = dashboard->framesDrawn();
    const Result r = measure(app.applicationFilePath(), window.winId(), seconds);
    std::printf(
        "  %-9s round trip p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  (%zu answered, %zu "
        "unanswered at the end; dashboard frames drawn %d)\n",
        qPrintable(tab), r.p50, r.p99, r.max, r.answered, r.lost,
        dashboard->framesDrawn() - frames_before);
    app.report_and_reset();
    std::printf("    panels drawn (setPanel / paint, ms):\n");
    for (const auto& [kind, cost] : drawing->drawCosts())
      std::printf("      %-14s %4d x  set max %6.1f mean %5.1f  paint max %6.1f mean %5.1f\n",
                  std::string(flotilla::charts::name_of(kind)).c_str(), cost.panels,
                  cost.set_max_ms, cost.set_total_ms / cost.panels, cost.paint_max_ms,
                  cost.paint_total_ms / cost.panels);
    std::fflush(stdout);
    if (!shots.isEmpty()) {
      const QString file = shots + "/" + tab + "-scale" + scale + ".png";
      window.screen()->grabWindow(window.winId()).save(file);
      std::printf("  screenshot %s\n", qPrintable(file));
    }
  }
  for (const auto& run : runs)
    if (window.listedState(run) == "running" || window.listedState(run) == "starting")
      emit window.requestKill(run);
  wait_until([&] { return window.listedState(live) != "running"; }, 30000);
  std::printf(
      "  method: _NET_WM_PING from a separate X client every 50 ms, answered by Qt on\n"
      "  the window's thread; the runs were started from this window (local agent niced)\n");
  return 0;
}
