#include "flotilla/controller/paths.h"

#include <QCoreApplication>
#include <QStandardPaths>

namespace flotilla::controller {

QString default_database_path() {
  return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) +
         "/flotilla/flotilla.db";
}

std::filesystem::path sibling_program(const std::string& name) {
  return std::filesystem::path(QCoreApplication::applicationDirPath().toStdString()) / name;
}

}  // namespace flotilla::controller
