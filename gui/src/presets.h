#pragma once
// Where the window finds the experiment presets: installed beside the
// programs (PREFIX/share/flotilla/presets next to PREFIX/bin), else the
// source tree's resources/presets that this build was made from.

#include <QStringList>

namespace flotilla::gui {

// The presets directory in use; empty when there is none.
QString presets_directory();
// Its *.yaml files, full paths, by name.
QStringList preset_files();

}  // namespace flotilla::gui
