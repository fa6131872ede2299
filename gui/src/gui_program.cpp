// flotilla-gui's command line: the window; with --render, one dashboard
// panel drawn to a file without a display (what `flotilla plot` runs); with
// --render-points, a study's chart from its data file (what a study report
// runs); with --screenshot, the window on a run's dashboard saved to a file. --help needs
// no display either: it is answered before any window system is opened.
#include "gui_program.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QIcon>
#include <QScreen>
#include <QTimer>
#include <QWindow>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <variant>

#include "dashboard.h"
#include "flotilla/charts/export.h"
#include "flotilla/charts/points_chart.h"
#include "flotilla/controller/paths.h"
#include "flotilla/controller/store.h"
#include "main_window.h"

namespace {

constexpr int kBadInput = 2;  // as the flotilla CLI: every problem named, nothing written

int fail(const QString& message) {
  std::fprintf(stderr, "flotilla-gui: %s\n", message.toLocal8Bit().constData());
  return kBadInput;
}

// `name` as an argument of its own or as `name=value`.
bool has_argument(int argc, char** argv, const char* name) {
  const size_t length = std::strlen(name);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], name, length) == 0 &&
        (argv[i][length] == '\0' || argv[i][length] == '='))
      return true;
  return false;
}

// --size, or what is wrong with it.
std::variant<QSize, QString> image_size(const QCommandLineParser& parser) {
  const QStringList size = parser.value("size").split('x');
  int width = 0, height = 0;
  bool w_ok = false, h_ok = false;
  if (size.size() == 2) width = size[0].toInt(&w_ok), height = size[1].toInt(&h_ok);
  if (!w_ok || !h_ok || width < 200 || height < 150 || width > 10000 || height > 10000)
    return "--size \"" + parser.value("size") +
           "\": expected WIDTHxHEIGHT in pixels, from 200x150 to 10000x10000, e.g. 1000x560";
  return QSize(width, height);
}

// --render-points FILE -o IMAGE: a study's chart from its data file.
int render_points(const QCommandLineParser& parser) {
  const QString source = parser.value("render-points");
  QFile file(source);
  if (!file.open(QIODevice::ReadOnly))
    return fail("cannot read " + source + ": " + file.errorString());
  const auto parsed = flotilla::charts::parse_points_chart(file.readAll().toStdString(), source);
  if (!parsed.data) return fail(parsed.error);
  const auto size = image_size(parser);
  if (const auto* problem = std::get_if<QString>(&size)) return fail(*problem);
  if (parser.value("output").isEmpty())
    return fail("--render-points needs -o FILE.png or FILE.svg");
  const QString error = flotilla::charts::render_points_chart(*parsed.data, std::get<QSize>(size),
                                                              parser.value("output"));
  return error.isEmpty() ? 0 : fail(error);
}

// The request --render describes, or the first problem with it.
std::variant<flotilla::charts::RenderRequest, QString> render_request(
    const QCommandLineParser& parser) {
  using namespace flotilla::charts;
  RenderRequest request;
  request.database = parser.value("db").toStdString();
  for (const auto& run : parser.values("run")) request.runs.push_back(run.toStdString());
  if (request.runs.empty()) return QString("--render needs a run: --run RUN (several to overlay)");
  const QString panel = parser.value("panel");
  const auto kind = panel_kind_from_name(panel.toStdString());
  if (!kind) {
    QStringList names;
    for (const auto k : kAllPanels)
      names << QString::fromLatin1(name_of(k).data(), int(name_of(k).size()));
    return "--panel \"" + panel + "\": expected one of " + names.join(", ");
  }
  request.panel = *kind;
  const auto x = x_mode_from_name(parser.value("x").toStdString());
  if (!x) return "--x \"" + parser.value("x") + "\": expected step, time or relative";
  request.options.x = *x;
  bool ok = false;
  request.options.smoothing = parser.value("smoothing").toDouble(&ok);  // C locale, always
  if (!ok || request.options.smoothing < 0 || request.options.smoothing > 0.99)
    return "--smoothing \"" + parser.value("smoothing") + "\": expected a number from 0 to 0.99";
  const auto size = image_size(parser);
  if (const auto* problem = std::get_if<QString>(&size)) return *problem;
  request.size = std::get<QSize>(size);
  request.output = parser.value("output");
  if (request.output.isEmpty()) return QString("--render needs -o FILE.png or FILE.svg");
  return request;
}

// Opens the window on `run`'s dashboard, waits for every step of it to be
// drawn, and saves what the screen shows.
int screenshot(const QString& database, const QString& run, const QString& file, double smoothing) {
  try {
    const flotilla::controller::Store store(database, flotilla::controller::StoreAccess::read_only);
    if (!store.run(run.toStdString())) return fail("no run \"" + run + "\" in " + database);
  } catch (const std::exception& e) {
    return fail(QString::fromStdString(e.what()));
  }
  // View only: a screenshot must not resume, start or write anything.
  flotilla::gui::MainWindow window(
      database, flotilla::controller::sibling_program("flotilla-agent"), nullptr, true);
  window.show();
  window.showRun(run);
  auto* dashboard = window.dashboard();
  dashboard->setSmoothing(smoothing);
  QElapsedTimer waited;
  waited.start();
  while (!(dashboard->frame() && !dashboard->frame()->coarse)) {
    if (waited.elapsed() > 120000) return fail("the dashboard of " + run + " took over 2 minutes");
    QApplication::processEvents(QEventLoop::AllEvents, 50);
  }
  // Let layouts and charts settle before taking the picture.
  QElapsedTimer settle;
  settle.start();
  while (settle.elapsed() < 300) QApplication::processEvents(QEventLoop::AllEvents, 50);
  const QPixmap shot = QGuiApplication::platformName() == "xcb"
                           ? window.screen()->grabWindow(window.winId())
                           : window.grab();
  if (!shot.save(file)) return fail("cannot write " + file);
  return 0;
}

// Qt's notes that say nothing to a person (the offscreen platform cannot
// hint window sizes; no runtime directory is set under a bare shell) are
// dropped; every other message goes on as Qt would print it.
QtMessageHandler qt_message_handler = nullptr;
void quiet_message_handler(QtMsgType type, const QMessageLogContext& context, const QString& text) {
  if (text.contains("propagateSizeHints") || text.startsWith("QStandardPaths: XDG_RUNTIME_DIR"))
    return;
  if (qt_message_handler) qt_message_handler(type, context, text);
}

void add_options(QCommandLineParser& parser) {
  parser.setApplicationDescription("Design, run, watch and compare distributed training runs.");
  parser.addHelpOption();
  parser.addOption(
      {{"d", "db"}, "the SQLite database", "path", flotilla::controller::default_database_path()});
  parser.addOption({"run", "a run to show (--render: several are overlaid)", "run"});
  parser.addOption({"render", "draw one panel to a file (-o) and exit; needs no display"});
  parser.addOption({"panel",
                    "--render: throughput, step_time, memory, bandwidth, communication, loss or "
                    "system",
                    "panel", "throughput"});
  parser.addOption({"x", "--render: the x axis, step, time or relative", "mode", "step"});
  parser.addOption({"smoothing", "--render and --screenshot: 0 to 0.99", "weight", "0"});
  parser.addOption({"size", "--render: WIDTHxHEIGHT in pixels", "size", "1000x560"});
  parser.addOption({{"o", "output"}, "--render: the .png or .svg to write", "file"});
  parser.addOption({"screenshot", "open the window on --run's dashboard, save it, exit", "file"});
  parser.addOption({"render-points",
                    "draw a study's chart from its data file (study_chart.json) to -o and exit; "
                    "needs no display",
                    "file"});
}

}  // namespace

namespace flotilla::gui {

int run_program(int argc, char** argv) {
  // Help needs no display: a core application (no window system) prints it.
  if (has_argument(argc, argv, "--help") || has_argument(argc, argv, "-h") ||
      has_argument(argc, argv, "-?") || has_argument(argc, argv, "--help-all")) {
    QCoreApplication core(argc, argv);
    QCoreApplication::setApplicationName("flotilla");
    QCommandLineParser parser;
    add_options(parser);
    parser.process(core);  // prints the help and exits
    return 0;
  }
  // Rendering needs no display; a screenshot without one is drawn off screen.
  const bool render =
      has_argument(argc, argv, "--render") || has_argument(argc, argv, "--render-points");
  if (render ||
      (has_argument(argc, argv, "--screenshot") && qEnvironmentVariableIsEmpty("DISPLAY") &&
       qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  qt_message_handler = qInstallMessageHandler(quiet_message_handler);
  QApplication app(argc, argv);
  QApplication::setApplicationName("flotilla");
  // The desktop entry's name (flotilla.desktop): docks and Wayland compositors
  // match the window to it and show its icon. The installed theme icon first,
  // the one compiled in for a build tree that is not installed.
  QGuiApplication::setDesktopFileName("flotilla");
  QApplication::setWindowIcon(QIcon::fromTheme("flotilla", QIcon(":/icons/flotilla.svg")));
  QCommandLineParser parser;
  add_options(parser);
  parser.process(app);
  const QString database = parser.value("db");

  if (parser.isSet("render-points")) return render_points(parser);
  if (render) {
    const auto request = render_request(parser);
    if (const auto* problem = std::get_if<QString>(&request)) return fail(*problem);
    const QString error =
        flotilla::charts::render_panel(std::get<flotilla::charts::RenderRequest>(request));
    return error.isEmpty() ? 0 : fail(error);
  }
  if (parser.isSet("screenshot")) {
    if (parser.values("run").size() != 1) return fail("--screenshot needs one --run RUN");
    bool ok = false;
    const double smoothing = parser.value("smoothing").toDouble(&ok);  // C locale, always
    if (!ok || smoothing < 0 || smoothing > 0.99)
      return fail("--smoothing \"" + parser.value("smoothing") +
                  "\": expected a number from 0 to 0.99");
    return screenshot(database, parser.value("run"), parser.value("screenshot"), smoothing);
  }
  int code = 0;
  {
    flotilla::gui::MainWindow window(database,
                                     flotilla::controller::sibling_program("flotilla-agent"));
    window.show();
    if (parser.isSet("run")) window.showRun(parser.value("run"));
    code = app.exec();
  }
  // Closing returns in bounded time and may leave the worker in an SSH
  // connect (an unreachable node): end without static destructors under it.
  // The store is SQLite in WAL (crash-safe); records not yet stored stay in
  // the agents' spools for the next attach.
  if (flotilla::gui::MainWindow::workersLeftRunning() > 0) {
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}

}  // namespace flotilla::gui
