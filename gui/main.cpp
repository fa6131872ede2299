// flotilla-gui: the desktop window over the controller.
#include <QApplication>
#include <QCommandLineParser>

#include "flotilla/controller/paths.h"
#include "main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("flotilla");
  QCommandLineParser parser;
  parser.setApplicationDescription("Design, run, watch and compare distributed training runs.");
  parser.addHelpOption();
  QCommandLineOption db({"d", "db"}, "the SQLite database", "path",
                        flotilla::controller::default_database_path());
  parser.addOption(db);
  parser.process(app);
  flotilla::gui::MainWindow window(parser.value(db),
                                   flotilla::controller::sibling_program("flotilla-agent"));
  window.show();
  return app.exec();
}
