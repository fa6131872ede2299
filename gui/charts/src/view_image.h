// Writing what a chart view draws to a PNG or SVG file (export.cpp), shared
// by the dashboard's panels and the study charts.
#pragma once

#include <QGraphicsView>
#include <QSize>
#include <QString>

namespace flotilla::charts {

// `view` drawn at `size` (empty: its own) into `file`, by its suffix (.png or
// .svg), whole or not at all; an error message naming the file, or empty.
QString save_view_image(const QGraphicsView& view, const QString& file, QSize size,
                        const QString& title, const QString& description);

}  // namespace flotilla::charts
