#pragma once
// The selected run's dashboard: controls shared by every panel (x axis,
// smoothing, rank and node filter, the breakdown's rank), the grid of panels
// (W&B's panel grid), and a Details tab. Loading and building happen on the
// DashboardLoader's thread; this widget only draws the frames it sends.
//
// Drawing: the newest frame waits in one slot (a newer one replaces it); a
// timer takes it at most kFramesPerSecond times a second, and every panel of
// a frame taken is drawn, one panel per turn of the event loop so that input
// never waits long, before the next frame is taken. A panel is never left
// behind however slow drawing is, and no frame is built to be thrown away:
// the loader builds the next one once the window has taken the last. A
// dashboard on a tab that is not shown takes no frame until it is shown.

#include <QElapsedTimer>
#include <QThread>
#include <QTimer>
#include <QWidget>

#include <map>
#include <memory>

#include "dashboard_loader.h"
#include "flotilla/charts/panel_widget.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSlider;
class QTabWidget;
class QToolButton;

namespace flotilla::gui {

class RunDetails;

class Dashboard : public QWidget {
  Q_OBJECT
 public:
  explicit Dashboard(const QString& database, QWidget* parent = nullptr);
  ~Dashboard() override;

  // Shows `runs` (one: per-rank detail; several: overlaid, one colour each).
  void showRuns(const QStringList& runs);
  void showRun(const QString& run) { showRuns({run}); }
  // Reads the shown runs again from the start: one came back to life (a
  // resumed run's new attempt), which an ended run's loader stopped following.
  void reload();
  const QStringList& runs() const { return runs_; }

  charts::PanelWidget* panel(charts::PanelKind kind) const { return panels_.at(kind); }
  charts::PanelSync* sync() const { return sync_; }
  RunDetails* details() const { return details_; }
  charts::PanelOptions options() const;
  static constexpr int kFramesPerSecond = 4;
  // The smoothing a dashboard starts with (the "raw" button shows none).
  static constexpr double kDefaultSmoothing = 0.9;
  // The frame drawn last (null before the first), and how many were drawn.
  const DashboardFrame* frame() const { return frame_.get(); }
  int framesDrawn() const { return frames_drawn_; }
  // What drawing each panel cost the window's thread since the last reset:
  // setPanel (QtCharts' series and axes) and the paint, in ms. Benches print
  // it; two clock reads a panel.
  struct DrawCost {
    int panels = 0;
    double set_total_ms = 0, set_max_ms = 0, paint_total_ms = 0, paint_max_ms = 0;
  };
  const std::map<charts::PanelKind, DrawCost>& drawCosts() const { return draw_costs_; }
  void resetDrawCosts() { draw_costs_.clear(); }

  void setXMode(charts::XMode mode);
  void setSmoothing(double weight);  // 0..0.99
  void setShownRanks(const std::optional<std::set<int64_t>>& ranks);
  void setShownNodes(const std::optional<std::set<std::string>>& nodes);
  void setBreakdownRank(std::optional<int64_t> rank);

 signals:
  // Every panel of a frame is drawn.
  void frameDrawn();
  // The loader gave up a superseded load of `runs` at its next page.
  void loadCancelled(const QStringList& runs);
  void requestShow(const QStringList& runs, const flotilla::charts::PanelOptions& options,
                   quint64 generation);
  void requestOptions(const flotilla::charts::PanelOptions& options, quint64 generation);

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void buildControls(QWidget* bar);
  void optionsChanged();
  void receive(std::shared_ptr<const DashboardFrame> frame);
  // Starts the pacing timer when a frame waits and none is being drawn.
  void scheduleFrame();
  void takeFrame();
  void drawNextPanel();
  // Hidden behind another tab of a window that is shown.
  bool outOfSight() const;
  // The newest frame any panel shows (the one being drawn, else the one
  // drawn whole), which the status line describes; null before the first.
  const DashboardFrame* onScreen() const { return pending_ ? pending_.get() : frame_.get(); }
  void updateFilters(const DashboardFrame& frame);
  void updateStatus();

  QThread loader_thread_;
  DashboardLoader* loader_;
  QStringList runs_;
  quint64 generation_ = 0;
  charts::PanelSync* sync_;
  std::map<charts::PanelKind, charts::PanelWidget*> panels_;
  RunDetails* details_;
  QTabWidget* tabs_;
  QLabel* status_;
  QComboBox* x_combo_;
  QSlider* smoothing_slider_;
  QDoubleSpinBox* smoothing_spin_;
  QToolButton *ranks_button_, *nodes_button_, *raw_button_;
  double smoothed_weight_ = kDefaultSmoothing;  // what "raw" unchecked goes back to
  QComboBox* breakdown_combo_;
  std::optional<std::set<int64_t>> shown_ranks_;
  std::optional<std::set<std::string>> shown_nodes_;
  std::optional<int64_t> breakdown_rank_;
  // Drawn whole; being drawn (a panel a turn); the newest one received, not
  // yet taken (the slot).
  std::shared_ptr<const DashboardFrame> frame_, pending_, latest_;
  size_t next_panel_ = 0;
  QTimer* pace_;             // single shot: takes the frame in the slot
  QElapsedTimer last_take_;  // when the last frame was taken
  int frames_drawn_ = 0;
  std::map<charts::PanelKind, DrawCost> draw_costs_;
  QString error_;
};

}  // namespace flotilla::gui
