// How a panel's series are drawn (panel_pens.cpp): pens that cost the same
// on every screen, and colours that Qt blends without its thread pool.
#include <gtest/gtest.h>
#include <QAreaSeries>
#include <QChart>
#include <QCoreApplication>
#include <QXYSeries>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "flotilla/charts/panel.h"
#include "flotilla/charts/panel_widget.h"

namespace flotilla::charts {
namespace {

// A panel widget showing `d`, laid out and drawn once.
struct Shown {
  explicit Shown(const PanelDescription& d) {
    widget.resize(900, 400);
    widget.show();
    widget.setPanel(prepare(d));
    QCoreApplication::sendPostedEvents();
    QCoreApplication::processEvents();
  }
  PanelSync sync;
  PanelWidget widget{&sync};
};

// A series of `points` points on a per-pixel zigzag around 10 + colour.
Series zigzag(const std::string& name, SeriesStyle style, int points, int colour = 0,
              int raw_of = -1) {
  Series s;
  s.name = name;
  s.style = style;
  s.colour = colour;
  s.raw_of = raw_of;
  auto x = std::make_shared<std::vector<double>>(), y = std::make_shared<std::vector<double>>();
  for (int i = 0; i < points; ++i) {
    x->push_back(i);
    y->push_back(10 + colour + std::sin(i * 1.7) * 3);
  }
  s.x = std::move(x);
  s.y = std::move(y);
  return s;
}

// Every line is drawn with a cosmetic pen of at most 1 device pixel, which
// the raster engine strokes fast on any screen (issue 22: a 1 px pen that is
// not cosmetic is 2 device pixels at scale 2 and took the general stroker).
// A dashed or dotted line of a point a pixel column reads as noise: drawn
// solid; zoomed in until its points are few, it is patterned again.
TEST(PanelPens, LinesAreCosmeticAndDensePatternedLinesSolid) {
  PanelDescription d;
  d.title = "pens";
  d.x_title = "step";
  d.y_axes = {{"ms"}};
  d.series = {zigzag("job", SeriesStyle::bold, 3000), zigzag("rank 0", SeriesStyle::thin, 3000),
              zigzag("exposed", SeriesStyle::dashed, 3000),
              zigzag("busy", SeriesStyle::dotted, 50)};
  Shown shown(d);
  auto& widget = shown.widget;
  auto& sync = shown.sync;
  auto pen_of = [&](const QString& name) {
    for (auto* series : widget.chart()->series())
      if (auto* line = qobject_cast<QXYSeries*>(series); line && line->name() == name)
        return line->pen();
    ADD_FAILURE() << "no line " << name.toStdString();
    return QPen();
  };
  for (auto* series : widget.chart()->series()) {
    auto* line = qobject_cast<QXYSeries*>(series);
    ASSERT_TRUE(line);
    EXPECT_TRUE(line->pen().isCosmetic()) << line->name().toStdString();
    EXPECT_LE(line->pen().widthF(), 1.0) << line->name().toStdString();
  }
  ASSERT_GT(widget.drawnPoints("exposed"), 400);
  EXPECT_EQ(pen_of("exposed").style(), Qt::SolidLine);
  EXPECT_EQ(pen_of("busy").style(), Qt::DotLine);
  sync.zoomTo(0, 100);
  QCoreApplication::processEvents();
  ASSERT_LE(widget.drawnPoints("exposed"), 400);
  EXPECT_EQ(pen_of("exposed").style(), Qt::DashLine);
  EXPECT_EQ(pen_of("busy").style(), Qt::DotLine);
}

// Qt 6.4 blends a long run of spans of a translucent colour on its global
// thread pool while the window's thread waits: with the ranks busy, a noisy
// panel's paint took up to 220 ms (issue 22). Every series is drawn in opaque
// colours that look see-through over the plot's background, and every raw
// series is drawn before (under) every other one.
TEST(PanelPens, SeriesAreOpaqueAndRawSeriesLieUnderTheSmoothedLines) {
  PanelDescription d;
  d.title = "opaque";
  d.x_title = "step";
  d.y_axes = {{"ms"}};
  d.series = {zigzag("rank 0 (raw)", SeriesStyle::faint_raw, 2000, 0, 1),
              zigzag("rank 0", SeriesStyle::thin, 2000, 0, -1),
              zigzag("job (raw)", SeriesStyle::faint_raw, 2000, 1, 3),
              zigzag("job", SeriesStyle::bold, 2000, 1, -1),
              zigzag("busy", SeriesStyle::dotted, 2000, 2, -1),
              zigzag("data", SeriesStyle::stacked_area, 2000, 3, -1),
              zigzag("forward", SeriesStyle::stacked_area, 2000, 4, -1)};
  Shown shown(d);
  auto& widget = shown.widget;
  QStringList order;
  for (auto* s : widget.chart()->series()) {
    const std::string name = s->objectName().toStdString();
    order << s->objectName();
    if (auto* area = qobject_cast<QAreaSeries*>(s)) {
      EXPECT_EQ(area->brush().color().alpha(), 255) << name;
      EXPECT_EQ(area->pen().color().alpha(), 255) << name;
    } else if (auto* line = qobject_cast<QXYSeries*>(s)) {
      EXPECT_EQ(line->pen().color().alpha(), 255) << name;
    }
  }
  EXPECT_EQ(order,
            QStringList({"rank 0 (raw)", "job (raw)", "rank 0", "job", "busy", "data", "forward"}));
  // See-through still: a raw line is lighter than its smoothed line.
  auto pen_named = [&](const QString& name) {
    for (auto* s : widget.chart()->series())
      if (s->objectName() == name) return qobject_cast<QXYSeries*>(s)->pen();
    return QPen();
  };
  EXPECT_GT(pen_named("job (raw)").color().lightness(), pen_named("job").color().lightness() + 40);
}

}  // namespace
}  // namespace flotilla::charts
