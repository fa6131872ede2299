#pragma once
// A panel on screen: a QtCharts chart of a PanelDescription, redrawn from
// per-pixel-column decimations of its series (so a million points cost what
// the plot's width costs), with a hover cursor, rubber-band zoom on x,
// double-click reset, legend entries that hide their series, a log y toggle
// and export. Panels that share a PanelSync move their cursor and zoom
// together; while not zoomed a panel follows its data's newest x.

#include <QColor>
#include <QFrame>
#include <QObject>
#include <QSet>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "flotilla/charts/panel.h"
#include "flotilla/charts/transforms.h"

class QChart;
class QChartView;
class QLabel;
class QToolButton;

namespace flotilla::charts {

// A description with what drawing it needs, made once per new frame of data
// (off the window's thread when it is large): a pyramid per series (over the
// running sum for stacked areas) and the x extent.
struct PreparedPanel {
  PanelDescription description;
  std::vector<Pyramid> pyramids;
  double x_min = 0, x_max = 0;  // over every series; equal when there is none
};
std::shared_ptr<const PreparedPanel> prepare(PanelDescription description);

// What the panels of one view share: the hover cursor's x and the x zoom.
class PanelSync : public QObject {
  Q_OBJECT
 public:
  using QObject::QObject;
  std::optional<std::pair<double, double>> zoom() const { return zoom_; }

 public slots:
  void hoverAt(double x) { emit hovered(x); }
  void hoverEnd() { emit hoverEnded(); }
  void zoomTo(double x0, double x1);
  void resetZoom();

 signals:
  void hovered(double x);
  void hoverEnded();
  void zoomChanged();

 private:
  std::optional<std::pair<double, double>> zoom_;
};

class PanelChartView;

class PanelWidget : public QFrame {
  Q_OBJECT
 public:
  // `sync` may be null (a panel alone, as the headless renderer draws it).
  explicit PanelWidget(PanelSync* sync, QWidget* parent = nullptr);
  ~PanelWidget() override;

  // Shows `panel` from now on, keeping zoom, hidden series and log y.
  void setPanel(std::shared_ptr<const PreparedPanel> panel);
  // Lays the chart out and paints it on screen before returning (nothing
  // when hidden). Left to Qt, the changes of every panel a caller set one
  // after another wait for one paint of the whole window.
  void paintNow();
  const PreparedPanel* panel() const { return panel_.get(); }
  void setLogY(bool log);
  bool logY() const { return log_y_; }
  // Hides or shows the legend entry `name` and its series (as a click on the legend does).
  void setSeriesHidden(const QString& name, bool hidden);
  bool seriesHidden(const QString& name) const { return hidden_.contains(name); }
  // The x range drawn now.
  std::pair<double, double> xRange() const { return {x0_, x1_}; }
  // The text of the hover box at the cursor's last x, empty when none.
  QString hoverText() const;
  // How many points the chart's series hold now (decimated), by legend name.
  qsizetype drawnPoints(const QString& name) const;
  QChart* chart() const;
  QChartView* chartView() const;
  // Toolbar and notes off: only the chart (exports and the headless renderer).
  void setChrome(bool shown);

  // Writes the chart as PNG or SVG (by the file's extension) at `size` (the
  // widget's own size when empty); the series' values as CSV. Each returns
  // an error message, empty on success.
  QString saveCsv(const QString& file) const;
  QString saveImage(const QString& file, QSize size = {}) const;

 signals:
  void exportFailed(const QString& message);

 private:
  friend class PanelChartView;
  void rebuild();            // series, axes and legend from the description
  void relabelReferences();  // the reference lines' names and labels
  // A HiDPI screen (device pixel ratio 1.5 or more): no antialiasing, and
  // lines nearly opaque (a device pixel is small).
  bool finePixels() const;
  // The colour the plot area shows behind the series.
  QColor plotBackground() const;
  void redraw();       // the points of the x range at the plot's width, the y range
  void applyXRange();  // from the sync's zoom or the data's extent
  void showHover(double x);
  void hideHover();
  void exportTo(const QString& format);
  void placeLabels();

  PanelSync* sync_;
  std::shared_ptr<const PreparedPanel> panel_;
  PanelChartView* view_;
  QLabel* notes_;
  QToolButton *log_button_, *export_button_;
  QWidget* toolbar_;
  bool log_y_ = false;
  QSet<QString> hidden_;
  double x0_ = 0, x1_ = 1;
  uint64_t data_version_ = 0;  // counts setPanel calls: the drawn points' data
  // Inside redraw(): the plot area its own axis ranges move (their labels'
  // widths) is not a reason to redraw again, which never settled once the
  // ranges depended on the plot's size (the labels' band).
  bool redrawing_ = false;
  std::optional<double> hover_x_;
  struct Drawn;
  std::unique_ptr<Drawn> drawn_;  // the chart objects of the current description
};

}  // namespace flotilla::charts
