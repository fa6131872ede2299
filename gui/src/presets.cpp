#include "presets.h"

#include <QCoreApplication>
#include <QDir>

namespace flotilla::gui {

QString presets_directory() {
  const QStringList candidates{
      QCoreApplication::applicationDirPath() + "/../share/flotilla/presets",
      QStringLiteral(FLOTILLA_PRESETS_DIR),
  };
  for (const auto& dir : candidates)
    if (QDir(dir).exists()) return QDir(dir).canonicalPath();
  return {};
}

QStringList preset_files() {
  const QString dir = presets_directory();
  if (dir.isEmpty()) return {};
  QStringList files;
  for (const auto& name : QDir(dir).entryList({"*.yaml"}, QDir::Files, QDir::Name))
    files << dir + "/" + name;
  return files;
}

}  // namespace flotilla::gui
