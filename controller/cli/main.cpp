// flotilla: the command-line face of the controller.
#include <QCoreApplication>

#include "flotilla/cli/cli.h"

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);  // QtSql loads its SQLite driver through it
  QCoreApplication::setApplicationName("flotilla");
  return flotilla::controller::run_cli(argc, argv);
}
