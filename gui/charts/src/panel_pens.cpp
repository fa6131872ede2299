// How every line of a panel is drawn: cosmetic 1-device-pixel pens, the
// style and alpha of each series style on plain and HiDPI screens.
#include "panel_pens.h"

#include <QString>

#include <algorithm>

namespace flotilla::charts {

QColor colour_of(int index) {
  const auto name = palette_colour(index);
  return QColor(QString::fromLatin1(name.data(), int(name.size())));
}

// Every pen that draws data is cosmetic: its width is in device pixels, so a
// line costs the same on every screen. Qt's raster engine draws a line with
// its fast cosmetic stroker only while the pen is at most 1 device pixel
// wide; a 1 px pen that is not cosmetic is 2 device pixels at
// QT_SCALE_FACTOR=2 and every segment went through the general stroker again
// (a window answering after seconds on a HiDPI screen, issue 22). QtCharts
// draws a solid line segment by segment but a patterned one as one path,
// which a wide pen strokes by filling its outline (1.7 s for a dashed
// per-pixel zigzag at 1.6 px against 5 ms at 1 px: docs/dashboard.md,
// Performance).
QPen cosmetic_pen(const QColor& colour, qreal width, Qt::PenStyle style) {
  QPen pen(colour, width, style);
  pen.setCosmetic(true);
  return pen;
}

// The axis line and grids too (the theme sets them after addAxis).
void make_cosmetic(QAbstractAxis* axis) {
  auto cosmetic = [](QPen pen) {
    pen.setCosmetic(true);
    pen.setWidthF(std::min<qreal>(pen.widthF(), 1.0));
    return pen;
  };
  axis->setLinePen(cosmetic(axis->linePen()));
  axis->setGridLinePen(cosmetic(axis->gridLinePen()));
  axis->setMinorGridLinePen(cosmetic(axis->minorGridLinePen()));
}

// A dashed or dotted line of more points than this is drawn solid (and
// lighter): its dashes fall on a per-pixel zigzag and read as noise, not as a
// pattern.
constexpr qsizetype kMostPatternedPoints = 400;

// How see-through a line of each style is. On a HiDPI screen (device pixel
// ratio 1.5 or more) the 1-device-pixel line is half as wide to the eye, and
// the ranks' lines and legend marks at the alphas of a plain screen were
// hard to see (scale-2 screenshots): there they are nearly opaque.
int alpha_of(SeriesStyle style, bool fine_pixels) {
  switch (style) {
    case SeriesStyle::thin:
      return fine_pixels ? 230 : 150;
    case SeriesStyle::dashed:
      return fine_pixels ? 240 : 170;
    case SeriesStyle::dotted:
      return fine_pixels ? 210 : 120;
    case SeriesStyle::faint_raw:
      return fine_pixels ? 90 : 60;
    default:
      return 255;
  }
}

// Lines look see-through but are drawn opaque. Qt 6.4's raster engine blends
// a batch of more than 96 spans of a translucent colour on the global thread
// pool, the window's thread waiting for the pool's threads; a dense noisy
// line is thousands of such spans, and with ranks and the loader busy on the
// machine's cores every wait took a scheduler turn: a throughput panel's
// paint took 40 ms on average and up to 220 ms where 5 ms of work was to do
// (window_latency, issue 22). An opaque colour is blended inline, and costs
// less per pixel. Where two lines cross, the later one covers the earlier
// instead of mixing with it; the smoothed lines are drawn after their raw ones.
QColor over_background(const QColor& colour, int alpha, const QColor& background) {
  const auto mix = [alpha](int front, int back) {
    return (front * alpha + back * (255 - alpha) + 127) / 255;
  };
  return QColor(mix(colour.red(), background.red()), mix(colour.green(), background.green()),
                mix(colour.blue(), background.blue()));
}

QPen pen_of(const Series& s, bool fine_pixels, qsizetype points, const QColor& background) {
  QPen pen = cosmetic_pen(colour_of(s.colour));
  const bool dense = points > kMostPatternedPoints;
  const auto see_through = [&pen, &s, fine_pixels, &background] {
    pen.setColor(over_background(pen.color(), alpha_of(s.style, fine_pixels), background));
  };
  switch (s.style) {
    case SeriesStyle::bold:
      // 1 device pixel too: a wider cosmetic pen leaves the fast stroker
      // (QStroker's joins took most of a scale-2 redraw, issue 22). The job's
      // line stands out by being opaque over its ranks' lighter lines.
      break;
    case SeriesStyle::thin:
    case SeriesStyle::faint_raw:
      see_through();
      break;
    case SeriesStyle::dashed:
    case SeriesStyle::dotted:
      if (dense)
        see_through();
      else
        pen.setStyle(s.style == SeriesStyle::dashed ? Qt::DashLine : Qt::DotLine);
      break;
    default:
      break;
  }
  return pen;
}

}  // namespace flotilla::charts
