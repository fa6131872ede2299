#pragma once
// The plan preview beside the designer: what the engine will do with the
// config, in the engine's own numbers. The window never links Torch, so it
// runs the sibling `flotilla-train --plan --config FILE [--measure]
// [--predict --links BENCH]` as a
// process, never waiting for it: a change of the form restarts a short
// timer, and when it fires the plan is computed ("computing…") and shown
// when the process answers. A newer config replaces an older one still
// being computed. Without flotilla-train (a gui-only build) it says so.

#include <QElapsedTimer>
#include <QHash>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QTimer>
#include <QVector>
#include <QWidget>

#include <memory>
#include <optional>

#include "flotilla/protocol/experiment_config.h"

class QCheckBox;
class QLabel;
class QTextBrowser;

namespace flotilla::gui {

// The numbers the preview shows, as the engine printed them (docs/plan.md
// on the engine branch names every field).
struct PlanNumbers {
  struct Block {
    int64_t index = 0;
    QString name, kind;
    int64_t parameters = 0;
    int64_t trainable = 0;  // parameters that train at the first step
  };
  struct Stage {
    int64_t stage = 0, first_block = 0, blocks = 0;
    int64_t parameters = 0, trainable = 0;
    int64_t allreduce_ranks = 0;  // 0: the stage averages nothing
    int64_t allreduce_bytes = 0;  // per step: 4 x the stage's trainable parameters
    int64_t allreduce_buckets = 0;
  };
  struct Rank {
    int64_t rank = 0, node_index = 0, local_rank = 0, stage = 0, replica = 0;
    QString node;
  };
  struct Transfer {
    bool sent = false;
    int64_t fp32_bytes = 0, wire_bytes = 0;  // one full micro-batch
  };
  struct Boundary {
    int64_t boundary = 0;  // between this stage and the next
    QVector<int64_t> shape;
    Transfer activations, gradients;
  };
  // elastic.pipe: each layout the pipeline changes to as its prefix freezes.
  struct ElasticStep {
    int64_t frozen_blocks = 0;
    int64_t at_step = -1;  // -1: whenever AutoFreeze gets there
    int64_t stages = 1, replicas = 1;
    QVector<int64_t> balance;
  };
  QString model, strategy, schedule, codec;
  QString elastic_costs;  // empty: not elastic; "measured" or "estimated"
  QVector<ElasticStep> elastic;
  int64_t world_size = 0, replicas = 1, stages = 1, chunks = 1;
  int64_t batch_size = 0;
  QVector<int64_t> micro_batch_sizes;
  QVector<int64_t> balance;
  QString balance_source;  // given, measured, estimated, whole model
  double balance_ms = 0;   // how long measuring or estimating took
  int64_t parameters = 0, trainable_parameters = 0;
  QVector<Block> blocks;
  QVector<Stage> stage_list;
  QVector<Rank> ranks;
  QVector<Boundary> boundaries;
  // --predict (docs/predict.md): the step on this machine's block times.
  struct Prediction {
    double step_ms = 0, samples_per_s = 0, compute_ms = 0, exposed_ms = 0, bubble = 0;
    int64_t samples_per_step = 0, micro_batch = 0;
    QString links;              // what the link model came from; empty: none
    bool from_profile = false;  // block times from this machine's kept profile
    qint64 profile_measured_ms = 0;
    QString profile_node;  // or from this node's (`flotilla nodes profile`)
    QStringList notes;
    QVector<double> stage_ms;  // each stage's forward + backward of a micro-batch
    // The fullest rank's peak memory, each stage's, and whether it is the
    // CUDA allocator's rather than resident memory; 0: not predicted.
    int64_t peak_memory_bytes = 0;
    QVector<int64_t> stage_peak_memory_bytes;
    bool memory_on_gpu = false;
  };
  std::optional<Prediction> prediction;
};

// Reads flotilla-train --plan's JSON; throws std::runtime_error naming what is missing.
PlanNumbers parse_plan(const QByteArray& json);

class PlanPreview : public QWidget {
  Q_OBJECT
 public:
  explicit PlanPreview(QWidget* parent = nullptr);
  ~PlanPreview() override;

  // flotilla-train's path (default: beside this program).
  void setProgram(const QString& program);
  // How long the form must stay still before a plan is computed.
  void setDelay(int milliseconds) { debounce_.setInterval(milliseconds); }
  // The newest link bench of each node set (node_set_key -> the --links
  // JSON), from the store, read by the controller worker.
  void setLinkBenches(const QHash<QString, QString>& benches);
  // Each node's block profiles (node -> a JSON array of `profile` record
  // bodies, `flotilla nodes profile`), read by the controller worker: the
  // prediction takes the blocks' times from the first of the run's nodes
  // that has any.
  void setNodeProfiles(const QHash<QString, QString>& profiles);
  // Predict the step (flotilla-train --predict), as the checkbox does.
  void setPredicting(bool on);
  // The config to plan; nothing: the config is invalid (shown as such).
  void request(const std::optional<ExperimentConfig>& config);

  enum class State { idle, waiting, computing, shown, failed, unavailable };
  State state() const { return state_; }
  // What the preview says now, in words ("computing…", the engine's error).
  QString statusText() const;
  const PlanNumbers& numbers() const { return numbers_; }
  // The plan as shown (HTML), for tests and screenshots.
  QString shownText() const;

 signals:
  void stateChanged(flotilla::gui::PlanPreview::State state);

 private:
  void start();
  void finished(int exit_code, QProcess::ExitStatus status);
  void setState(State state, const QString& text);
  void render();
  QString prediction_html() const;

  QString program_;
  QTimer debounce_;
  std::unique_ptr<QProcess> process_;
  QTemporaryDir dir_;
  std::optional<ExperimentConfig> pending_;
  bool pending_measure_ = false;
  QString profiledNode() const;
  QElapsedTimer clock_;
  State state_ = State::idle;
  PlanNumbers numbers_;
  QLabel* status_;
  QCheckBox* measure_;
  QCheckBox* predict_;
  QHash<QString, QString> link_benches_;
  QString links_used_;  // the node set whose bench the shown prediction used; empty: none
  QHash<QString, QString> node_profiles_;
  QString profiles_used_;  // the node whose profiles the shown prediction was given; empty: none
  QTextBrowser* view_;
};

}  // namespace flotilla::gui
