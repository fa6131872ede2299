#include "paths.h"

#include <QStandardPaths>

namespace flotilla::controller {

QString default_database_path() {
  return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) +
         "/flotilla/flotilla.db";
}

std::filesystem::path sibling_program(const std::string& name) {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path() / name;
}

}  // namespace flotilla::controller
