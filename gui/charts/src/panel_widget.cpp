#include "flotilla/charts/panel_widget.h"

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QCoreApplication>
#include <QDateTime>
#include <QDateTimeAxis>
#include <QFileDialog>
#include <QGraphicsLayout>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMenu>
#include <QMessageBox>
#include <QScatterSeries>
#include <QScopedValueRollback>
#include <QTextDocument>
#include <QTextOption>
#include <QToolButton>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

#include "panel_chart_view.h"
#include "panel_pens.h"
#include "panel_widget_drawn.h"

namespace flotilla::charts {

namespace {

// The room kept between a reference line's label and the plot's edges.
constexpr qreal kLabelInset = 4;

// Sizes each labelled reference's text for a plot `width` wide (wrapped
// when wider than the plot) and returns the height of the band they fill
// together at the top of the plot; 0 when no reference has a label. A label
// already sized for this width is left as it is: every setTextWidth lays its
// document out again, and each redraw asks twice (the band, then the places).
qreal size_reference_labels(const std::vector<QGraphicsTextItem*>& labels,
                            const std::vector<ReferenceLine>& references, qreal width) {
  const qreal room = std::max<qreal>(1, width - 2 * kLabelInset);
  qreal band = 0;
  for (size_t r = 0; r < labels.size() && r < references.size(); ++r) {
    if (references[r].label.empty()) continue;
    QGraphicsTextItem* label = labels[r];
    const bool sized =
        label->textWidth() < 0 ? label->boundingRect().width() <= room : label->textWidth() == room;
    if (!sized) {
      label->setTextWidth(-1);
      if (label->boundingRect().width() > room) label->setTextWidth(room);
    }
    band += label->boundingRect().height();
  }
  return band > 0 ? band + 2 : 0;
}

// The upper end an axis needs so that the data, up to `top`, stays out of
// the top `band` of a plot `height` high: [low, result] maps `top` to
// `band` below the plot's top edge.
double with_headroom(double low, double high, double top, qreal band, qreal height) {
  if (!(band > 0) || !(height > 3 * band) || !std::isfinite(top)) return high;
  const double f = double(band / height);
  return std::max(high, (top - low * f) / (1 - f));
}

}  // namespace

std::shared_ptr<const PreparedPanel> prepare(PanelDescription description) {
  auto prepared = std::make_shared<PreparedPanel>();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  std::shared_ptr<std::vector<double>> running;  // the stack's sum so far
  for (const auto& s : description.series) {
    std::shared_ptr<const std::vector<double>> y = s.y;
    if (s.style == SeriesStyle::stacked_area) {
      auto sum = std::make_shared<std::vector<double>>(*s.y);
      if (running && running->size() == sum->size())
        for (size_t i = 0; i < sum->size(); ++i)
          (*sum)[i] += std::isfinite((*running)[i]) ? (*running)[i] : 0;
      running = sum;
      y = sum;
    }
    prepared->pyramids.emplace_back(s.x, y);
    if (!s.x->empty()) {
      lo = std::min(lo, s.x->front());
      hi = std::max(hi, s.x->back());
    }
  }
  if (lo <= hi) prepared->x_min = lo, prepared->x_max = hi;
  prepared->description = std::move(description);
  return prepared;
}

void PanelSync::zoomTo(double x0, double x1) {
  if (x1 < x0) std::swap(x0, x1);
  if (!(x1 > x0)) return;
  zoom_ = {x0, x1};
  emit zoomChanged();
}

void PanelSync::resetZoom() {
  zoom_.reset();
  emit zoomChanged();
}

PanelWidget::PanelWidget(PanelSync* sync, QWidget* parent)
    : QFrame(parent), sync_(sync ? sync : new PanelSync(this)), drawn_(std::make_unique<Drawn>()) {
  setFrameShape(QFrame::StyledPanel);
  view_ = new PanelChartView(this);
  view_->setRenderHint(QPainter::Antialiasing);
  auto* chart = new QChart;
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->legend()->setShowToolTips(true);
  // A square of the series' colour cannot tell a rank's busy (solid), exposed
  // (dashed) and operations/s (dotted) apart: each entry shows a piece of its line.
  chart->legend()->setMarkerShape(QLegend::MarkerShapeFromSeries);
  // A solid background: the default theme's is a gradient, and Qt fills a
  // gradient on its GUI thread pool a band of lines at a time, the window's
  // thread waiting for each band. With ranks busy on the other cores each
  // wait took a scheduler turn, thousands a second.
  chart->setBackgroundBrush(chart->palette().color(QPalette::Base));
  chart->layout()->setContentsMargins(0, 0, 0, 0);
  chart->setMargins(QMargins(6, 4, 6, 4));
  QFont title = chart->titleFont();
  title.setBold(true);
  title.setPointSizeF(title.pointSizeF() * 1.05);
  chart->setTitleFont(title);
  view_->setChart(chart);

  log_button_ = new QToolButton;
  log_button_->setText("log y");
  log_button_->setCheckable(true);
  log_button_->setToolTip("Logarithmic y axis (values <= 0 are left out)");
  log_button_->setObjectName("logButton");
  export_button_ = new QToolButton;
  export_button_->setText("Export");
  export_button_->setObjectName("exportButton");
  export_button_->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(export_button_);
  menu->addAction("PNG image…", this, [this] { exportTo("png"); });
  menu->addAction("SVG image…", this, [this] { exportTo("svg"); });
  menu->addAction("CSV of every value…", this, [this] { exportTo("csv"); });
  export_button_->setMenu(menu);
  toolbar_ = new QWidget;
  auto* tools = new QHBoxLayout(toolbar_);
  tools->setContentsMargins(0, 0, 0, 0);
  tools->addStretch();
  tools->addWidget(log_button_);
  tools->addWidget(export_button_);
  notes_ = new QLabel;
  notes_->setWordWrap(true);
  notes_->setStyleSheet("color: #555;");
  notes_->hide();

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 2, 4, 4);
  layout->setSpacing(0);
  layout->addWidget(toolbar_);
  layout->addWidget(view_, 1);
  layout->addWidget(notes_);

  connect(log_button_, &QToolButton::toggled, this, &PanelWidget::setLogY);
  connect(sync_, &PanelSync::hovered, this, &PanelWidget::showHover);
  connect(sync_, &PanelSync::hoverEnded, this, &PanelWidget::hideHover);
  connect(sync_, &PanelSync::zoomChanged, this, [this] {
    applyXRange();
    redraw();
  });
  connect(chart, &QChart::plotAreaChanged, this, [this] {
    if (!redrawing_) redraw();
  });
}

PanelWidget::~PanelWidget() = default;

QChart* PanelWidget::chart() const {
  return view_->chart();
}
QChartView* PanelWidget::chartView() const {
  return view_;
}

void PanelWidget::setChrome(bool shown) {
  toolbar_->setVisible(shown);
  notes_->setVisible(shown && !notes_->text().isEmpty());
  setFrameShape(shown ? QFrame::StyledPanel : QFrame::NoFrame);
  layout()->setContentsMargins(shown ? QMargins(4, 2, 4, 4) : QMargins());
}

void PanelWidget::setPanel(std::shared_ptr<const PreparedPanel> panel) {
  const bool same_shape = [&] {
    if (!panel_ || !panel) return false;
    const auto &a = panel_->description, &b = panel->description;
    if (a.empty_reason != b.empty_reason || a.series.size() != b.series.size() ||
        a.references.size() != b.references.size() || a.marks.size() != b.marks.size() ||
        a.y_axes.size() != b.y_axes.size() || a.x_mode != b.x_mode || a.title != b.title)
      return false;
    for (size_t i = 0; i < a.series.size(); ++i)
      if (a.series[i].name != b.series[i].name || a.series[i].style != b.series[i].style)
        return false;
    return true;
  }();
  panel_ = std::move(panel);
  ++data_version_;
  // A live run's median moves with every frame: its label is rewritten in
  // place rather than the chart rebuilt (series, axes and legend) each time.
  if (!same_shape)
    rebuild();
  else
    relabelReferences();
  applyXRange();
  redraw();
}

void PanelWidget::paintNow() {
  if (!isVisible()) return;
  // The axes' and legend's layout, then the scene's queued note of what
  // changed (which marks the view's dirty region), then the paint itself.
  if (auto* layout = chart()->layout()) layout->activate();
  if (auto* scene = chart()->scene()) QCoreApplication::sendPostedEvents(scene, QEvent::MetaCall);
  view_->viewport()->repaint();
}

void PanelWidget::setLogY(bool log) {
  if (log == log_y_) return;
  log_y_ = log;
  QSignalBlocker block(log_button_);
  log_button_->setChecked(log);
  rebuild();
  redraw();
}

void PanelWidget::setSeriesHidden(const QString& name, bool hidden) {
  if (hidden)
    hidden_.insert(name);
  else
    hidden_.remove(name);
  if (!panel_) return;
  const auto& d = panel_->description;
  for (size_t i = 0; i < drawn_->series.size(); ++i)
    if (drawn_->series[i] && legend_name(d, i) == name) drawn_->series[i]->setVisible(!hidden);
  // The legend keeps the entry, greyed, so that it can be clicked back.
  for (auto* marker : chart()->legend()->markers()) {
    if (marker->label() != name) continue;
    marker->setVisible(true);
    QColor label = hidden ? QColor(170, 170, 170) : palette().color(QPalette::WindowText);
    marker->setLabelBrush(label);
  }
  redraw();
}

void PanelWidget::rebuild() {
  QChart* c = chart();
  hideHover();
  c->removeAllSeries();
  for (auto* axis : c->axes()) {
    c->removeAxis(axis);
    delete axis;
  }
  for (auto* label : drawn_->reference_labels) delete label;
  delete drawn_->empty_text;
  delete drawn_->cursor;
  delete drawn_->hover_box;  // owns the label
  *drawn_ = Drawn{};
  if (!panel_) return;
  const auto& d = panel_->description;
  c->setTitle(q(d.title));
  QStringList notes;
  for (const auto& note : d.notes) notes << q(note);
  if (d.coarse)
    notes << "Drawn from 256-step buckets (means) while every step loads; the CSV waits for them.";
  notes_->setText(notes.join("\n"));
  notes_->setVisible(toolbar_->isVisible() && !notes.isEmpty());
  if (!d.empty_reason.empty()) {
    c->legend()->hide();
    drawn_->empty_text = new QGraphicsTextItem(c);
    drawn_->empty_text->setPlainText(q(d.empty_reason));
    QFont font = drawn_->empty_text->font();
    font.setPointSizeF(font.pointSizeF() * 1.1);
    drawn_->empty_text->setFont(font);
    drawn_->empty_text->setDefaultTextColor(QColor(90, 90, 90));
    placeLabels();
    return;
  }
  c->legend()->show();
  // Axes: x at the bottom, the first y on the left, others on the right.
  if (d.x_mode == XMode::wall_time) {
    auto* axis = new QDateTimeAxis;
    axis->setFormat("HH:mm:ss");
    drawn_->x_axis = axis;
  } else {
    auto* axis = new QValueAxis;
    axis->setLabelFormat(d.x_mode == XMode::step ? "%.0f" : "%.4g");
    drawn_->x_axis = axis;
  }
  drawn_->x_axis->setTitleText(q(d.x_title));
  c->addAxis(drawn_->x_axis, Qt::AlignBottom);
  make_cosmetic(drawn_->x_axis);
  std::vector<bool> stacked_axis(d.y_axes.size(), false);
  for (const auto& s : d.series)
    if (s.style == SeriesStyle::stacked_area && size_t(s.axis) < d.y_axes.size())
      stacked_axis[size_t(s.axis)] = true;
  for (size_t a = 0; a < d.y_axes.size(); ++a) {
    // Stacked areas rest on zero, which a log axis cannot show: they stay linear.
    const bool log = log_y_ && !stacked_axis[a];
    QAbstractAxis* axis;
    if (log) {
      auto* l = new QLogValueAxis;
      l->setBase(10);
      l->setLabelFormat("%g");
      l->setMinorTickCount(-1);
      axis = l;
    } else {
      auto* v = new QValueAxis;
      v->setLabelFormat("%.4g");
      axis = v;
    }
    axis->setTitleText(q(d.y_axes[a].title));
    c->addAxis(axis, a == 0 ? Qt::AlignLeft : Qt::AlignRight);
    make_cosmetic(axis);
    drawn_->y_axes.push_back(axis);
    drawn_->log_axis.push_back(log);
  }
  drawn_->series.resize(d.series.size(), nullptr);
  drawn_->upper.resize(d.series.size(), nullptr);
  drawn_->lower.resize(d.series.size(), nullptr);
  bool first_stacked = true;
  for (size_t i = 0; i < d.series.size(); ++i) {
    const auto& s = d.series[i];
    QAbstractSeries* series = nullptr;
    if (s.style == SeriesStyle::markers) {
      auto* scatter = new QScatterSeries;
      scatter->setMarkerSize(9);
      scatter->setColor(colour_of(s.colour));
      scatter->setPen(cosmetic_pen(colour_of(s.colour).darker(130)));
      series = scatter;
    } else if (s.style == SeriesStyle::stacked_area) {
      auto* upper = new QLineSeries;
      QLineSeries* lower = first_stacked ? nullptr : new QLineSeries;
      first_stacked = false;
      auto* area = new QAreaSeries(upper, lower);
      upper->setParent(area);
      if (lower) lower->setParent(area);
      // Opaque, as the lines are (over_background: a translucent fill is
      // blended on Qt's thread pool).
      area->setBrush(over_background(colour_of(s.colour), 170, plotBackground()));
      area->setPen(cosmetic_pen(colour_of(s.colour).darker(120)));
      drawn_->upper[i] = upper;
      drawn_->lower[i] = lower;
      series = area;
    } else {
      auto* line = new QLineSeries;
      line->setPen(pen_of(s, finePixels(), 0, plotBackground()));
      series = line;
    }
    series->setName(legend_name(d, i));
    series->setObjectName(
        QString::fromStdString(s.name));  // a raw series' legend name is its line's
    series->setVisible(!hidden_.contains(legend_name(d, i)));
    drawn_->series[i] = series;
  }
  // QtCharts draws series in the order they were added. Every raw series
  // goes first: its lines are opaque (pen_of) and would cover the smoothed
  // lines of the series before it.
  for (const bool raw : {true, false})
    for (size_t i = 0; i < d.series.size(); ++i) {
      if ((d.series[i].style == SeriesStyle::faint_raw) != raw) continue;
      c->addSeries(drawn_->series[i]);
      drawn_->series[i]->attachAxis(drawn_->x_axis);
      drawn_->series[i]->attachAxis(
          drawn_->y_axes.at(size_t(std::clamp(d.series[i].axis, 0, int(d.y_axes.size()) - 1))));
    }
  for (const auto& r : d.references) {
    // Two points, 1 device pixel, dashed: the cosmetic stroker draws it at
    // no cost on any screen (it was dash-dot 1.8 px through the general one).
    auto* line = new QLineSeries;
    line->setPen(cosmetic_pen(colour_of(r.colour).darker(110), 1.0, Qt::DashLine));
    line->setName(legend_name(r));
    c->addSeries(line);
    line->attachAxis(drawn_->x_axis);
    line->attachAxis(drawn_->y_axes.at(size_t(std::clamp(r.axis, 0, int(d.y_axes.size()) - 1))));
    drawn_->references.push_back(line);
    auto* label = new QGraphicsTextItem(c);
    label->setDefaultTextColor(colour_of(r.colour).darker(115));
    QTextOption wrapped = label->document()->defaultTextOption();
    wrapped.setAlignment(Qt::AlignRight);
    wrapped.setWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
    label->document()->setDefaultTextOption(wrapped);
    label->setZValue(10);
    label->setVisible(!r.label.empty());
    drawn_->reference_labels.push_back(label);
  }
  for (const auto& m : d.marks) {
    // Across the plot, solid, 1 device pixel: a change of layout is a moment
    // every panel shares, not a level.
    auto* line = new QLineSeries;
    line->setPen(cosmetic_pen(m.colour < 0 ? QColor(90, 90, 90) : colour_of(m.colour).darker(120),
                              1.0, Qt::SolidLine));
    line->setName(q(m.label));
    c->addSeries(line);
    line->attachAxis(drawn_->x_axis);
    line->attachAxis(drawn_->y_axes.at(0));
    drawn_->marks.push_back(line);
  }
  relabelReferences();
  // Raw values behind a smoothed line have no legend entry of their own; a
  // click on an entry hides or shows its series.
  const auto markers = c->legend()->markers();
  for (auto* marker : markers) {
    for (size_t i = 0; i < d.series.size(); ++i)
      if (marker->series() == drawn_->series[i] && d.series[i].style == SeriesStyle::faint_raw)
        marker->setVisible(false);
    // A stacked area's entry is a filled square of its colour: shaped "from
    // the series" (lines show a piece of their dash) it came out hollow.
    if (auto* area = qobject_cast<QAreaSeries*>(marker->series())) {
      marker->setShape(QLegend::MarkerShapeRectangle);
      marker->setBrush(area->brush());
      marker->setPen(area->pen());
    }
    if (hidden_.contains(marker->label())) marker->setLabelBrush(QColor(170, 170, 170));
    connect(marker, &QLegendMarker::clicked, this, [this, marker] {
      setSeriesHidden(marker->label(), !hidden_.contains(marker->label()));
    });
  }
  // A long legend under the plot gets its names cut ("ran..."): beside the
  // plot each entry has a line of its own.
  size_t entries = d.references.size(), letters = 0;
  for (const auto& r : d.references) letters += size_t(legend_name(r).size());
  for (const auto& x : d.series)
    if (x.style != SeriesStyle::faint_raw) ++entries, letters += x.name.size();
  c->legend()->setAlignment(entries > 5 || letters > 60 ? Qt::AlignRight : Qt::AlignBottom);
}

void PanelWidget::relabelReferences() {
  const auto& references = panel_->description.references;
  for (size_t r = 0; r < references.size() && r < drawn_->references.size(); ++r) {
    const QString text = q(references[r].label);
    if (drawn_->reference_labels[r]->toPlainText() == text) continue;
    drawn_->references[r]->setName(legend_name(references[r]));
    drawn_->reference_labels[r]->setHtml(
        "<span style=\"background-color: rgba(255, 255, 255, 215)\">" + text.toHtmlEscaped() +
        "</span>");
  }
}

void PanelWidget::applyXRange() {
  if (sync_->zoom()) {
    std::tie(x0_, x1_) = *sync_->zoom();
    return;
  }
  if (!panel_) return;
  x0_ = panel_->x_min;
  x1_ = panel_->x_max;
  if (!(x1_ > x0_)) {
    x0_ -= 0.5;
    x1_ += 0.5;
  }
}

QColor PanelWidget::plotBackground() const {
  // The chart draws no plot area background of its own: its plot shows the
  // chart's background.
  return chart()->backgroundBrush().color();
}

bool PanelWidget::finePixels() const {
  return view_->devicePixelRatioF() >= 1.5;
}

void PanelWidget::redraw() {
  const QScopedValueRollback<bool> inside(redrawing_, true);
  // On a HiDPI screen a device pixel is small enough that lines need no
  // antialiasing, and the stroker's antialiased path is what a redraw spends
  // its time in there.
  const bool fine_pixels = finePixels(), smooth_edges = !fine_pixels;
  if (view_->renderHints().testFlag(QPainter::Antialiasing) != smooth_edges)
    view_->setRenderHint(QPainter::Antialiasing, smooth_edges);
  if (!panel_ || !panel_->description.empty_reason.empty() || !drawn_->x_axis) {
    placeLabels();
    return;
  }
  const auto& d = panel_->description;
  const bool wall = d.x_mode == XMode::wall_time;
  auto chart_x = [wall](double x) { return wall ? x * 1000 : x; };
  const int columns = std::max(50, int(chart()->plotArea().width()));
  std::vector<double> lo(d.y_axes.size(), std::numeric_limits<double>::infinity());
  std::vector<double> hi(d.y_axes.size(), -std::numeric_limits<double>::infinity());
  auto extend = [&](int axis, double y) {
    const size_t a = size_t(std::clamp(axis, 0, int(d.y_axes.size()) - 1));
    if (!std::isfinite(y) || (drawn_->log_axis[a] && !shown_on_log_axis(y))) return;
    lo[a] = std::min(lo[a], y);
    hi[a] = std::max(hi[a], y);
  };
  // The series' points at this range and width. A redraw that changes
  // neither (a legend click, a relabel, a resize in height) keeps them, and
  // QtCharts is not asked to lay them out again.
  const Drawn::Decimation key{data_version_, x0_, x1_, columns};
  const bool changed = drawn_->decimated != key;
  if (changed) {
    drawn_->decimated = key;
    drawn_->points.assign(d.series.size(), {});
    for (size_t i = 0; i < d.series.size(); ++i) {
      const auto& s = d.series[i];
      const size_t a = size_t(std::clamp(s.axis, 0, int(d.y_axes.size()) - 1));
      const bool stacked = s.style == SeriesStyle::stacked_area;
      const auto points = panel_->pyramids[i].decimate(
          x0_, x1_, columns, stacked ? Reduction::mean : Reduction::min_max);
      QList<QPointF>& drawn = drawn_->points[i];
      drawn.reserve(qsizetype(points.size()));
      for (const auto& p : points) {
        if (drawn_->log_axis[a] && !shown_on_log_axis(p.y)) continue;
        drawn.push_back({chart_x(p.x), p.y});
      }
    }
  }
  for (size_t i = 0; i < d.series.size(); ++i) {
    const auto& s = d.series[i];
    if (s.style == SeriesStyle::stacked_area) extend(s.axis, 0);
    if (!drawn_->series[i]->isVisible()) continue;
    for (const auto& p : std::as_const(drawn_->points[i]))
      if (p.x() >= chart_x(x0_) && p.x() <= chart_x(x1_)) extend(s.axis, p.y());
  }
  // New points go in after the axes' new ranges: a range change lays out
  // every series' points again, so the series are emptied first and each is
  // laid out once, with its new points in its new range.
  if (changed)
    for (size_t i = 0; i < d.series.size(); ++i) {
      if (drawn_->upper[i]) {
        drawn_->upper[i]->clear();
        if (drawn_->lower[i]) drawn_->lower[i]->clear();
      } else if (auto* xy = qobject_cast<QXYSeries*>(drawn_->series[i])) {
        xy->clear();
      }
    }
  for (size_t r = 0; r < d.references.size(); ++r) {
    const auto& ref = d.references[r];
    drawn_->references[r]->replace({{chart_x(x0_), ref.y}, {chart_x(x1_), ref.y}});
    extend(ref.axis, ref.y);
  }
  if (wall)
    static_cast<QDateTimeAxis*>(drawn_->x_axis)
        ->setRange(QDateTime::fromMSecsSinceEpoch(qint64(chart_x(x0_))),
                   QDateTime::fromMSecsSinceEpoch(qint64(std::ceil(chart_x(x1_)))));
  else
    drawn_->x_axis->setRange(x0_, x1_);
  // The reference lines' labels sit in a band at the top of the plot that
  // every axis leaves free of data: a label never covers a line.
  const QRectF plot = chart()->plotArea();
  const qreal band = size_reference_labels(drawn_->reference_labels, d.references, plot.width());
  for (size_t a = 0; a < d.y_axes.size(); ++a) {
    std::pair<double, double> range;
    if (drawn_->log_axis[a])
      range = log_axis_range(lo[a], hi[a]);
    else if (d.y_axes[a].percent && lo[a] >= 0 && hi[a] <= 100)
      range = {0, 100};
    else
      range = lo[a] <= hi[a] ? linear_axis_range(lo[a], hi[a]) : std::pair{0.0, 1.0};
    if (lo[a] <= hi[a]) {
      if (drawn_->log_axis[a] && range.first > 0 && hi[a] > 0)
        range.second =
            std::pow(10.0, with_headroom(std::log10(range.first), std::log10(range.second),
                                         std::log10(hi[a]), band, plot.height()));
      else if (!drawn_->log_axis[a])
        range.second = with_headroom(range.first, range.second, hi[a], band, plot.height());
    }
    drawn_->y_axes[a]->setRange(range.first, range.second);
    // Ticks at round numbers (0, 500, 1000), not at fifths of the data's range.
    if (auto* linear = qobject_cast<QValueAxis*>(drawn_->y_axes[a])) {
      const double span = range.second - range.first;
      if (span > 0 && std::isfinite(span)) {
        const double decade = std::pow(10.0, std::floor(std::log10(span / 5)));
        double interval = decade;
        for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0})
          if (span / (m * decade) <= 6) {
            interval = m * decade;
            break;
          }
        linear->setTickType(QValueAxis::TicksDynamic);
        linear->setTickAnchor(0);
        linear->setTickInterval(interval);
        // Four significant digits print 0.26791 and 0.26794 alike: below 1 the
        // labels get as many decimals as the tick interval needs.
        const int decimals = interval < 1 ? int(std::ceil(-std::log10(interval) - 1e-9)) : 0;
        linear->setLabelFormat(interval < 1 ? QString("%.%1f").arg(decimals) : QString("%.4g"));
      }
    }
  }
  const QList<QPointF>* previous_stack = nullptr;  // a stacked area rests on the one before
  for (size_t i = 0; changed && i < d.series.size(); ++i) {
    if (drawn_->upper[i]) {
      drawn_->upper[i]->replace(drawn_->points[i]);
      if (drawn_->lower[i] && previous_stack) drawn_->lower[i]->replace(*previous_stack);
      previous_stack = &drawn_->points[i];
    } else if (auto* xy = qobject_cast<QXYSeries*>(drawn_->series[i])) {
      // A line's pen follows its points (pen_of: a dense patterned line is
      // drawn solid) and the screen.
      if (qobject_cast<QLineSeries*>(xy)) {
        const QPen pen =
            pen_of(d.series[i], fine_pixels, drawn_->points[i].size(), plotBackground());
        if (xy->pen() != pen) xy->setPen(pen);
      }
      xy->replace(drawn_->points[i]);
    }
  }
  // Each mark spans the first axis's range as now set, inside the x range shown.
  double y_low = 0, y_high = 1;
  if (const auto* linear = qobject_cast<QValueAxis*>(drawn_->y_axes.at(0))) {
    y_low = linear->min();
    y_high = linear->max();
  } else if (const auto* log = qobject_cast<QLogValueAxis*>(drawn_->y_axes.at(0))) {
    y_low = log->min();
    y_high = log->max();
  }
  for (size_t m = 0; m < d.marks.size(); ++m) {
    const double x = d.marks[m].x;
    if (x >= x0_ && x <= x1_)
      drawn_->marks[m]->replace({{chart_x(x), y_low}, {chart_x(x), y_high}});
    else
      drawn_->marks[m]->clear();
  }
  placeLabels();
  if (hover_x_) showHover(*hover_x_);
}

void PanelWidget::placeLabels() {
  const QRectF plot = chart()->plotArea();
  if (drawn_->empty_text) {
    const QRectF all = chart()->rect();
    drawn_->empty_text->setTextWidth(std::max(120.0, all.width() * 0.8));
    const QRectF text = drawn_->empty_text->boundingRect();
    drawn_->empty_text->setPos(all.center().x() - text.width() / 2,
                               all.center().y() - text.height() / 2);
  }
  if (!panel_) return;
  const auto& d = panel_->description;
  // The labels stack in the band at the top of the plot that redraw() keeps
  // free of data, each right-aligned at the plot's right end, in its line's
  // colour: a label wider than the plot wraps onto more lines instead of
  // running over the y axis and its title.
  size_reference_labels(drawn_->reference_labels, d.references, plot.width());
  qreal y = plot.top() + 1;
  for (size_t r = 0; r < drawn_->reference_labels.size(); ++r) {
    auto* label = drawn_->reference_labels[r];
    if (d.references[r].label.empty()) {  // a line named by its legend entry only
      label->setVisible(false);
      continue;
    }
    const QRectF box = label->boundingRect();
    label->setPos(std::max(plot.left() + kLabelInset, plot.right() - box.width() - kLabelInset), y);
    label->setVisible(y + box.height() <= plot.bottom() + 1);
    y += box.height();
  }
}

void PanelWidget::exportTo(const QString& format) {
  if (!panel_) return;
  const QString title = q(panel_->description.title).section(':', 0, 0).toLower().replace(' ', '_');
  const QString file =
      QFileDialog::getSaveFileName(this, "Export " + q(panel_->description.title),
                                   title + "." + format, format.toUpper() + " (*." + format + ")");
  if (file.isEmpty()) return;
  const QString error = format == "csv" ? saveCsv(file) : saveImage(file);
  if (error.isEmpty()) return;
  emit exportFailed(error);
  QMessageBox::warning(this, "Export", error);
}

}  // namespace flotilla::charts
