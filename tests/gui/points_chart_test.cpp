// A study's chart drawn from its data file: each line of ours solid with
// filled markers, the seed's dashed with hollow ones in the same colour, its
// own axis when its figures are of another scale, out-of-memory points
// along the top, category and log-2 x axes, and the file's mistakes named.
#include <gtest/gtest.h>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QImage>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>

#include <memory>

#include "flotilla/charts/points_chart.h"
#include "temp_dir.h"

namespace flotilla::charts {
namespace {

PointsChartData parsed(const std::string& text) {
  const auto result = parse_points_chart(text, "study_chart.json");
  EXPECT_TRUE(result.data) << result.error.toStdString();
  return result.data.value_or(PointsChartData{});
}

QString error_of(const std::string& text) {
  return parse_points_chart(text, "study_chart.json").error;
}

template <class Series>
std::vector<Series*> series_of(QChart& chart) {
  std::vector<Series*> out;
  for (auto* s : chart.series())
    if (auto* typed = qobject_cast<Series*>(s)) out.push_back(typed);
  return out;
}

constexpr const char* kMemory = R"({
  "title": "Peak memory", "x_label": "batch_size", "y_label": "peak mem MiB",
  "series": [
    {"name": "DDP", "source": "ours",
     "points": [{"x": 16, "y": 300}, {"x": 64, "y": 500}, {"x": 256, "y": null, "oom": true}]},
    {"name": "DDP", "source": "seed",
     "points": [{"x": 64, "y": 14336}, {"x": 128, "y": null, "oom": true}]}
  ]})";

TEST(PointsChart, OursAndTheSeedsShareAColourAndTheSeedOfAnotherScaleGetsItsOwnAxis) {
  std::unique_ptr<QChart> chart(build_points_chart(parsed(kMemory)));
  auto lines = series_of<QLineSeries>(*chart);
  ASSERT_EQ(lines.size(), 3u);  // ours, the seed's, and the legend's key to the dashes
  EXPECT_EQ(lines[2]->count(), 0);
  EXPECT_EQ(lines[2]->name(), "the seed's figures (dashed, hollow markers)");
  lines.pop_back();
  EXPECT_EQ(lines[0]->name(), "DDP");
  EXPECT_EQ(lines[1]->name(), "seed: DDP");
  EXPECT_EQ(lines[0]->pen().color(), lines[1]->pen().color());
  EXPECT_EQ(lines[0]->pen().style(), Qt::SolidLine);
  EXPECT_EQ(lines[1]->pen().style(), Qt::DashLine);
  EXPECT_EQ(lines[0]->count(), 2);  // the out-of-memory batch has no figure
  // Batches 16..256 span 16x: a log-2 axis. The seed's 14336 MiB beside our
  // 500 gets an axis on the right.
  EXPECT_TRUE(qobject_cast<QLogValueAxis*>(chart->axes(Qt::Horizontal).front()));
  ASSERT_EQ(chart->axes(Qt::Vertical).size(), 2u);
  EXPECT_EQ(lines[1]->attachedAxes().back()->alignment(), Qt::AlignRight);
  EXPECT_GT(static_cast<QValueAxis*>(lines[1]->attachedAxes().back())->max(), 14336);
  EXPECT_LT(static_cast<QValueAxis*>(lines[0]->attachedAxes().back())->max(), 1000);
  // In the legend: our line, the key to the seed's dashes (not the seed's
  // line of the same name) and the out-of-memory marks; no line's markers.
  QChartView view(chart.get());
  view.show();
  int in_legend = 0;
  for (auto* marker : chart->legend()->markers()) in_legend += marker->isVisible() ? 1 : 0;
  view.setChart(new QChart);  // releases ours, which the view would delete
  EXPECT_EQ(in_legend, 3);
  // A square along the top for each batch that ran out of memory, in its
  // line's colour: ours at 256, the seed's at 128.
  std::vector<QPointF> squares;
  for (auto* s : series_of<QScatterSeries>(*chart))
    if (s->markerShape() == QScatterSeries::MarkerShapeRectangle && s->count() > 0) {
      EXPECT_EQ(s->borderColor(), lines[0]->pen().color());
      squares.push_back(s->at(0));
    }
  ASSERT_EQ(squares.size(), 2u);
  EXPECT_EQ(squares[0].x(), 256);
  EXPECT_EQ(squares[1].x(), 128);
}

TEST(PointsChart, TextXMakesCategoriesDownTheSideInTheOrderTheyFirstAppear) {
  std::unique_ptr<QChart> chart(build_points_chart(parsed(R"({"series": [
    {"name": "accuracy", "points": [{"x": "No", "y": 86.1}, {"x": "8 bits", "y": 85.8}]},
    {"name": "accuracy", "source": "seed", "points": [{"x": "8 bits", "y": 95.7}, {"x": "4 bits", "y": 87.1}]}
  ]})")));
  // Categories down the left side, the first at the top, whole; the figures across.
  auto* axis = qobject_cast<QCategoryAxis*>(chart->axes(Qt::Vertical).front());
  ASSERT_TRUE(axis);
  EXPECT_EQ(axis->categoriesLabels(), (QStringList{"No", "8 bits", "4 bits"}));
  EXPECT_TRUE(axis->isReverse());
  EXPECT_FALSE(axis->truncateLabels());
  // Same scale: one axis of figures.
  ASSERT_EQ(chart->axes(Qt::Horizontal).size(), 1u);
  const auto lines = series_of<QLineSeries>(*chart);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]->at(0), QPointF(95.7, 1));  // "8 bits" is the second category
}

TEST(PointsChart, RendersAPngOfTheAskedSize) {
  testing::TempDir dir;
  const QString file = QString::fromStdString((dir.path() / "chart.png").string());
  ASSERT_EQ(render_points_chart(parsed(kMemory), QSize(900, 500), file), "");
  const QImage image(file);
  EXPECT_EQ(image.size(), QSize(900, 500));
  EXPECT_NE(render_points_chart(parsed(kMemory), QSize(900, 500),
                                QString::fromStdString((dir.path() / "chart.gif").string())),
            "");
}

TEST(PointsChart, AMistakeInTheFileIsNamedByItsPlace) {
  EXPECT_EQ(error_of("[]"),
            "study_chart.json: expected a JSON object with title, x_label, y_label and series");
  EXPECT_EQ(error_of(R"({"series": []})"),
            "study_chart.json: series: expected a non-empty list of lines");
  EXPECT_EQ(error_of(R"({"series": [{"name": "a", "source": "theirs", "points": []}]})"),
            "study_chart.json: series[0].source: expected ours or seed, got theirs");
  EXPECT_EQ(error_of(R"({"series": [{"name": "a", "points": [{"x": 1, "y": "fast"}]}]})"),
            "study_chart.json: series[0].points[0].y: expected a finite number or null");
  EXPECT_EQ(error_of(R"({"series": [{"name": "a", "points": [{"x": 1, "oom": 1}]}]})"),
            "study_chart.json: series[0].points[0].oom: expected true or false");
  EXPECT_EQ(error_of(R"({"series": [{"name": "a", "source": 2, "points": []}]})"),
            "study_chart.json: series[0].source: expected ours or seed");
  EXPECT_EQ(error_of(R"({"series": [{"name": "a", "points": []}]})"),
            "study_chart.json: series: no line has a point to draw");
}

}  // namespace
}  // namespace flotilla::charts
