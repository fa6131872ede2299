#pragma once
// The dashboard's data, on a thread of its own: reads the shown runs from the
// store (read-only: a view never writes), builds and prepares every panel,
// and hands the window finished frames. A long run is painted first from its
// step buckets and then at full resolution; a live run is read again every
// quarter second from the last record read, per node, when the database
// changed. The window's thread only
// draws.

#include <QObject>
#include <QStringList>
#include <QTimer>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "flotilla/charts/panel_widget.h"
#include "flotilla/charts/run_data.h"
#include "flotilla/charts/run_facts.h"

namespace flotilla::controller {
class Store;
}

namespace flotilla::gui {

// Everything the dashboard shows at one moment.
struct DashboardFrame {
  quint64 generation = 0;  // of the request it answers; older ones are dropped
  QStringList runs;
  std::map<charts::PanelKind, std::shared_ptr<const charts::PreparedPanel>> panels;
  std::vector<charts::RunFacts> facts;  // one per run
  std::vector<int64_t> ranks;           // of the first run, for the filters
  std::vector<std::string> nodes;
  int64_t lead_rank = -1;
  bool coarse = false;  // painted from buckets; full resolution follows
  bool live = false;    // some run has not ended: more frames follow
  int64_t step_records = 0;
  double build_ms = 0;  // reading and building this frame took
};

class DashboardLoader : public QObject {
  Q_OBJECT
 public:
  explicit DashboardLoader(QString database);
  ~DashboardLoader() override;

  // Called from the window's thread: requests older than `generation` are
  // skipped when their turn comes (a dragged slider asks many times).
  void supersede(quint64 generation, bool new_runs) {
    latest_ = generation;
    if (new_runs) latest_show_ = generation;
  }

  // A run with more step records than this is painted from buckets first.
  static constexpr int64_t kCoarseAbove = 50000;

  // Called from the window's thread when it has taken a frame. Until then a
  // live run's polls read the new records but build no frame: a window's
  // thread slower than the polls (a busy machine) would otherwise have
  // frames, each the size of everything drawn, queue up without bound.
  // Then it reads at once, so that the next frame is built while the window
  // draws this one.
  void frameTaken() {
    frames_in_flight_ = 0;
    QMetaObject::invokeMethod(this, &DashboardLoader::poll, Qt::QueuedConnection);
  }

 public slots:
  // Shows `runs` (the first paint of a long run coarse, then full).
  void show(const QStringList& runs, const flotilla::charts::PanelOptions& options,
            quint64 generation);
  // The same runs, drawn with other options.
  void setOptions(const flotilla::charts::PanelOptions& options, quint64 generation);

 signals:
  void frameReady(std::shared_ptr<const flotilla::gui::DashboardFrame> frame);
  // A load of `runs` stopped at its next page: another show superseded it.
  void loadCancelled(const QStringList& runs);
  void failed(const QString& message, quint64 generation);

 private:
  void poll();  // live runs: the records stored since the last read
  void emitFrame(bool coarse, double started_ms);
  bool openStore();

  QString database_;
  std::unique_ptr<controller::Store> store_;
  QStringList shown_;
  std::vector<charts::RunData> runs_;
  charts::PanelOptions options_;
  quint64 generation_ = 0;
  std::atomic<quint64> latest_{0}, latest_show_{0};
  std::atomic<int> frames_in_flight_{0};
  bool news_waiting_ = false;  // records read while a frame was in flight
  // The database's data_version when the live runs were last read: a poll
  // that finds it unchanged reads nothing.
  std::optional<int64_t> read_version_;
  QTimer* poll_timer_ = nullptr;  // created on the loader's thread
};

}  // namespace flotilla::gui

Q_DECLARE_METATYPE(flotilla::charts::PanelOptions)
Q_DECLARE_METATYPE(std::shared_ptr<const flotilla::gui::DashboardFrame>)
