// The pen rules of a panel's chart (panel_pens.cpp): one place for the
// widths, patterns and alphas that keep lines cheap on every screen.
#pragma once

#include <QAbstractAxis>
#include <QColor>
#include <QPen>

#include "flotilla/charts/panel.h"

namespace flotilla::charts {

// The palette's colour `index`.
QColor colour_of(int index);
// A cosmetic pen: `width` in device pixels on every screen.
QPen cosmetic_pen(const QColor& colour, qreal width = 1.0, Qt::PenStyle style = Qt::SolidLine);
// The axis line and grids made cosmetic.
void make_cosmetic(QAbstractAxis* axis);
// How see-through a line of `style` is (0-255).
int alpha_of(SeriesStyle style, bool fine_pixels);
// `colour` at `alpha` over `background`, as one opaque colour.
QColor over_background(const QColor& colour, int alpha, const QColor& background);
// The pen of series `s` holding `points` points now, on a chart whose plot
// is `background`.
QPen pen_of(const Series& s, bool fine_pixels, qsizetype points, const QColor& background);

}  // namespace flotilla::charts
