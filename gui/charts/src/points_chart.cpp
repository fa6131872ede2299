#include "flotilla/charts/points_chart.h"

#include <QCategoryAxis>
#include <QChartView>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "panel_pens.h"
#include "view_image.h"

namespace flotilla::charts {
namespace {

using nlohmann::json;

QString text_of(const json& value) {
  if (value.is_string()) return QString::fromStdString(value.get<std::string>());
  // Numbers as people write them: 8, not 8.0; 0.25, not 0.250000.
  const double v = value.get<double>();
  return QString::number(v, 'g', 12);
}

// The figures' range over the lines `seed` picks (nullopt: all): from 0 (or below, for a
// negative figure) to a little above the highest, leaving room for the
// out-of-memory marks; but around the figures when all lie well above 0
// (accuracies of 81 to 96 %), where a 0 would flatten them.
std::pair<double, double> y_range(const PointsChartData& data, std::optional<bool> seed) {
  double low = INFINITY, high = -INFINITY;
  for (const auto& line : data.lines)
    if (!seed || line.seed == *seed)
      for (const auto& p : line.points)
        if (p.y) low = std::min(low, *p.y), high = std::max(high, *p.y);
  if (low > high) return {0, 1};  // no figures
  const double span = high - low;
  if (low > 0 && span > 0 && low > 0.5 * high) return {low - 0.15 * span, high + 0.15 * span};
  low = std::min(low, 0.0);
  if (high <= low) high = low + 1;
  return {low, high + (high - low) * 0.12};
}

// Whether the seed's figures are of another scale than ours (its GPUs'
// memory beside our CPUs'): more than 5x apart at their largest.
bool seed_needs_own_axis(const PointsChartData& data) {
  double ours = 0, seed = 0;
  for (const auto& line : data.lines)
    for (const auto& p : line.points)
      if (p.y) (line.seed ? seed : ours) = std::max(line.seed ? seed : ours, std::abs(*p.y));
  if (ours <= 0 || seed <= 0) return false;
  return std::max(ours, seed) > 5 * std::min(ours, seed);
}

}  // namespace

ParsedPointsChart parse_points_chart(const std::string& json_text, const QString& source) {
  const auto fail = [&](const QString& what) {
    return ParsedPointsChart{std::nullopt, source + ": " + what};
  };
  const auto root = json::parse(json_text, nullptr, false);
  if (!root.is_object())
    return fail("expected a JSON object with title, x_label, y_label and series");
  PointsChartData data;
  for (const auto& [key, into] :
       {std::pair{"title", &data.title}, std::pair{"x_label", &data.x_label},
        std::pair{"y_label", &data.y_label}}) {
    if (!root.contains(key)) continue;
    if (!root[key].is_string()) return fail(QString("%1: expected text").arg(key));
    *into = QString::fromStdString(root[key].get<std::string>());
  }
  if (!root.contains("series") || !root["series"].is_array() || root["series"].empty())
    return fail("series: expected a non-empty list of lines");
  bool any_text_x = false;
  for (size_t i = 0; i < root["series"].size(); ++i) {
    const auto& entry = root["series"][i];
    const QString where = QString("series[%1]").arg(i);
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("points") || !entry["points"].is_array())
      return fail(where + ": expected {name: text, source: ours|seed, points: [...]}");
    ChartLine line;
    line.name = QString::fromStdString(entry["name"].get<std::string>());
    if (entry.contains("source") && !entry["source"].is_string())
      return fail(where + ".source: expected ours or seed");
    const auto source_name = entry.value("source", std::string("ours"));
    if (source_name != "ours" && source_name != "seed")
      return fail(where + ".source: expected ours or seed, got " +
                  QString::fromStdString(source_name));
    line.seed = source_name == "seed";
    for (size_t k = 0; k < entry["points"].size(); ++k) {
      const auto& p = entry["points"][k];
      const QString at = where + QString(".points[%1]").arg(k);
      if (!p.is_object() || !p.contains("x") || !(p["x"].is_number() || p["x"].is_string()))
        return fail(at + ": expected {x: number or text, y: number or null, oom: bool}");
      ChartPoint point;
      point.x = text_of(p["x"]);
      if (p["x"].is_number())
        point.x_value = p["x"].get<double>();
      else
        any_text_x = true;
      if (p.contains("y") && !p["y"].is_null()) {
        if (!p["y"].is_number() || !std::isfinite(p["y"].get<double>()))
          return fail(at + ".y: expected a finite number or null");
        point.y = p["y"].get<double>();
      }
      if (p.contains("oom") && !p["oom"].is_boolean())
        return fail(at + ".oom: expected true or false");
      point.oom = p.value("oom", false);
      line.points.push_back(point);
    }
    data.lines.push_back(std::move(line));
  }
  const bool any_point = std::any_of(data.lines.begin(), data.lines.end(),
                                     [](const ChartLine& line) { return !line.points.empty(); });
  if (!any_point) return fail("series: no line has a point to draw");
  data.numeric_x = !any_text_x;
  return {std::move(data), {}};
}

QChart* build_points_chart(const PointsChartData& data) {
  auto* chart = new QChart;
  chart->setTitle(data.title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setBackgroundRoundness(0);

  // Categories in the order they first appear; numbers as themselves.
  std::vector<QString> categories;
  double x_low = INFINITY, x_high = -INFINITY;
  bool whole_x = true;  // counts (frozen blocks, stages): ticks on the counts
  for (const auto& line : data.lines)
    for (const auto& p : line.points) {
      if (!data.numeric_x) {
        if (std::find(categories.begin(), categories.end(), p.x) == categories.end())
          categories.push_back(p.x);
      } else {
        x_low = std::min(x_low, *p.x_value), x_high = std::max(x_high, *p.x_value);
        whole_x = whole_x && *p.x_value == std::round(*p.x_value);
      }
    }
  const auto x_of = [&](const ChartPoint& p) {
    if (data.numeric_x) return *p.x_value;
    return double(std::find(categories.begin(), categories.end(), p.x) - categories.begin());
  };
  const bool log_x = data.numeric_x && x_low > 0 && x_high >= 4 * x_low;

  QAbstractAxis* x_axis = nullptr;
  if (!data.numeric_x) {
    auto* axis = new QCategoryAxis;
    axis->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    for (size_t i = 0; i < categories.size(); ++i) axis->append(categories[i], double(i));
    axis->setRange(-0.5, double(categories.size()) - 0.5);
    axis->setReverse(true);  // the first category at the top
    axis->setTruncateLabels(false);
    x_axis = axis;
  } else if (log_x) {
    auto* axis = new QLogValueAxis;
    axis->setBase(2);
    axis->setLabelFormat("%g");
    axis->setRange(x_low / 1.3, x_high * 1.3);
    x_axis = axis;
  } else {
    auto* axis = new QValueAxis;
    if (whole_x && x_high - x_low <= 12) {
      axis->setRange(x_low - 0.25, x_high + 0.25);
      axis->setTickType(QValueAxis::TicksDynamic);
      axis->setTickAnchor(0);
      axis->setTickInterval(1);
    } else {
      const double pad = x_high > x_low ? (x_high - x_low) * 0.05 : 1;
      axis->setRange(x_low - pad, x_high + pad);
    }
    axis->setLabelFormat("%g");
    x_axis = axis;
  }
  x_axis->setTitleText(data.x_label);
  const bool own_seed_axis = seed_needs_own_axis(data);
  const auto make_y_axis = [&](bool seed, const QString& title) {
    auto* axis = new QValueAxis;
    const auto [low, high] = y_range(data, own_seed_axis ? std::optional(seed) : std::nullopt);
    axis->setRange(low, high);
    axis->applyNiceNumbers();  // ticks at 0.5, 1, 1.5, not at 0.475844
    axis->setLabelFormat("%g");
    axis->setTitleText(title);
    return axis;
  };
  // Categories (often long: "Pipeline-2gpu MobileNetV2 64 (4 chunks)") down
  // the left side, whole, with the figures along the bottom; numbers across.
  const bool across = data.numeric_x;
  auto* y_axis = make_y_axis(false, data.y_label);
  chart->addAxis(x_axis, across ? Qt::AlignBottom : Qt::AlignLeft);
  chart->addAxis(y_axis, across ? Qt::AlignLeft : Qt::AlignBottom);
  QValueAxis* seed_axis = y_axis;
  if (own_seed_axis) {
    seed_axis = make_y_axis(true, "seed: " + data.y_label + " (its own scale)");
    chart->addAxis(seed_axis, across ? Qt::AlignRight : Qt::AlignTop);
  }
  const auto at = [&](double x, double y) { return across ? QPointF(x, y) : QPointF(y, x); };

  int legend_entries = 0, legend_letters = 0;
  const auto attach = [&](QAbstractSeries* series, bool in_legend, bool seed) {
    chart->addSeries(series);
    series->attachAxis(x_axis);
    series->attachAxis(seed ? seed_axis : y_axis);
    for (auto* marker : chart->legend()->markers(series)) marker->setVisible(in_legend);
    if (in_legend) ++legend_entries, legend_letters += int(series->name().size());
  };
  // One colour per name, shared by ours and the seed's. A seed line of a
  // name ours has is not in the legend: one entry says what dashes mean.
  std::map<QString, int> colour_index;
  std::set<QString> our_names;
  bool any_seed = false;
  for (const auto& line : data.lines) {
    if (!line.seed) our_names.insert(line.name);
    any_seed = any_seed || line.seed;
  }
  const auto oom_marks = [](const QColor& fill, const QColor& border) {
    auto* marks = new QScatterSeries;
    marks->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    marks->setMarkerSize(10);
    marks->setColor(fill);
    marks->setBorderColor(border);
    return marks;
  };
  bool any_oom = false;
  for (const auto& line : data.lines) {
    const auto found = colour_index.try_emplace(line.name, int(colour_index.size())).first;
    const QColor colour = colour_of(found->second);
    const QColor fill = line.seed ? QColor(Qt::white) : colour;
    auto* path = new QLineSeries;
    path->setName((line.seed ? "seed: " : "") + line.name);
    path->setPen(
        cosmetic_pen(colour, line.seed ? 1.5 : 2.0, line.seed ? Qt::DashLine : Qt::SolidLine));
    auto* marks = new QScatterSeries;
    marks->setMarkerSize(line.seed ? 11 : 8);
    marks->setColor(fill);
    marks->setBorderColor(colour);
    // Out of memory: a square of the line's colour at the far end of its axis.
    auto* oom = oom_marks(fill, colour);
    std::vector<std::pair<double, double>> points;
    for (const auto& p : line.points) {
      if (p.y) points.emplace_back(x_of(p), *p.y);
      if (p.oom) {
        auto* axis = line.seed ? seed_axis : y_axis;
        oom->append(
            at(x_of(p), axis->max() - (axis->max() - axis->min()) * (line.seed ? 0.07 : 0.03)));
      }
    }
    std::sort(points.begin(), points.end());
    for (const auto& [x, y] : points) path->append(at(x, y)), marks->append(at(x, y));
    attach(path, !line.seed || !our_names.count(line.name), line.seed);
    attach(marks, false, line.seed);
    if (oom->count() > 0) {
      attach(oom, false, line.seed);
      any_oom = true;
    } else {
      delete oom;
    }
  }
  if (any_seed && !our_names.empty()) {
    auto* key = new QLineSeries;  // no points: a legend entry only
    key->setName("the seed's figures (dashed, hollow markers)");
    key->setPen(cosmetic_pen(QColor(90, 90, 90), 1.5, Qt::DashLine));
    attach(key, true, true);
  }
  if (any_oom) {
    auto* key = oom_marks(QColor(90, 90, 90), QColor(90, 90, 90));
    key->setName(across ? "out of memory (a square along the top)"
                        : "out of memory (a square along the right)");
    attach(key, true, false);
  }
  // A legend that would not fit in one row below the plot (about 7 pixels a
  // letter and 40 an entry, of 950) goes beside it, one entry a row.
  if (legend_letters * 7 + legend_entries * 40 > 950) chart->legend()->setAlignment(Qt::AlignRight);
  return chart;
}

QString render_points_chart(const PointsChartData& data, QSize size, const QString& output) {
  QChartView view(build_points_chart(data));
  view.setRenderHint(QPainter::Antialiasing);
  view.setAttribute(Qt::WA_DontShowOnScreen);
  view.resize(size);
  view.show();
  return save_view_image(view, output, size, data.title, "Flotilla study chart");
}

}  // namespace flotilla::charts
