// The charts library on runs stored in a real SQLite store: each panel's
// series hold the values derived from the stored records, smoothing, the x
// modes and the rank filter do what they say, and the exports (CSV, PNG,
// SVG) hold what the panel shows.
#include <gtest/gtest.h>
#include <QChart>
#include <QChartView>
#include <QCoreApplication>
#include <QFile>
#include <QGraphicsTextItem>
#include <QImage>
#include <QLegend>
#include <QLegendMarker>
#include <QTest>
#include <QXYSeries>
#include <QXmlStreamReader>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "flotilla/charts/export.h"
#include "flotilla/charts/panel.h"
#include "flotilla/charts/panel_widget.h"
#include "flotilla/charts/run_loader.h"
#include "flotilla/charts/transforms.h"
#include "flotilla/controller/store.h"
#include "run_rows.h"
#include "temp_dir.h"

namespace flotilla::charts {
namespace {

using controller::RecordRow;
using controller::RunRow;
using controller::Store;
using nlohmann::json;
using testing::ddp_run_row;

constexpr int kSteps = 40;
constexpr double kStartTime = 1'700'000'000.0;  // the node's clock at the start records

// What rank `rank` recorded for `step`: numbers that differ per rank and step
// so that a series taken from the wrong record or rank shows.
json step_body(int rank, int step) {
  const double data = 1.0 + 0.01 * step, forward = 4.0 + rank, backward = 8.0 + 0.1 * step,
               comm = 2.5 + 0.5 * rank, optimizer = 1.5;
  const double step_ms = data + forward + backward + comm + optimizer + 0.05;  // a little slack
  json body = {{"step", step},
               {"time", kStartTime + 2 + step * 0.05 + rank * 0.001},
               {"epoch", 0},
               {"samples", 128},
               {"samples_per_s", 128.0 / step_ms * 1000.0},
               {"step_ms", step_ms},
               {"data_ms", data},
               {"forward_ms", forward},
               {"backward_ms", backward},
               {"comm_ms", comm},
               {"comm_busy_ms", comm + 3},
               {"optimizer_ms", optimizer},
               {"bytes_sent", 400000.0 + 1000.0 * step + 7 * rank},
               {"bytes_recv", 390000.0 + 900.0 * step},
               {"algbw_gbps", 0.2 + 0.001 * step},
               {"busbw_gbps", 0.2 + 0.001 * step}};
  if (rank == 0) body["loss"] = 2.3 / (1.0 + 0.1 * step) + (step % 3) * 0.05;
  return body;
}

class StoredRun : public ::testing::Test {
 protected:
  void SetUp() override {
    Store store(database());
    const RunRow run = ddp_run_row("ddp-run", "charts", 2);
    store.create_run(run);
    int64_t seq = 0;
    auto append = [&](int rank, const std::string& type, const json& body) {
      json with_type = body;
      with_type["type"] = type;
      store.append_record(run.id, RecordRow{++seq, "local", rank, type, with_type.dump()});
    };
    for (int rank : {0, 1})
      append(rank, "start",
             {{"rank", rank}, {"world_size", 2}, {"device", "cpu"}, {"time", kStartTime}});
    for (int step = 1; step <= kSteps; ++step) {
      for (int rank : {0, 1}) append(rank, "step", step_body(rank, step));
      if (step % 20 == 0)
        append(0, "epoch",
               {{"epoch", step / 20 - 1},
                {"steps", step},
                {"loss", 1.0},
                {"acc_train", 0.5 + step * 0.01},
                {"acc_test", 0.4 + step * 0.01},
                {"time", kStartTime + 2 + step * 0.05}});
    }
    for (int s = 0; s < 4; ++s)
      append(-1, "system",
             {{"time", kStartTime + s},
              {"nic_rx", 1e6 * s * s},
              {"nic_tx", 2e6 * s},
              {"cpu_util", 0.25 * s},
              {"rank_rss", {{"0", 1e8 + s}, {"1", 2e8}}}});
    // A record missing its step and one that is not JSON: skipped and counted.
    append(1, "step", {{"time", kStartTime + 9}, {"step_ms", 3}});
    store.append_record(run.id, RecordRow{++seq, "local", 1, "step", "{not json"});
    store.flush();
  }

  QString database() const { return QString::fromStdString((dir_.path() / "runs.db").string()); }

  RunData load() const {
    const Store store(database(), controller::StoreAccess::read_only);
    return load_run(store, "ddp-run");
  }

  static const Series& series_named(const PanelDescription& panel, const std::string& name) {
    for (const auto& s : panel.series)
      if (s.name == name) return s;
    ADD_FAILURE() << "no series \"" << name << "\" in panel " << panel.title;
    static const Series none{};
    return none;
  }
  static bool has_series(const PanelDescription& panel, const std::string& name) {
    return std::any_of(panel.series.begin(), panel.series.end(),
                       [&](const Series& s) { return s.name == name; });
  }
  // The y of `series` at step `step` (x mode step).
  static double at_step(const Series& series, double step) {
    for (size_t i = 0; i < series.x->size(); ++i)
      if ((*series.x)[i] == step) return (*series.y)[i];
    ADD_FAILURE() << series.name << " has no point at step " << step;
    return kMissing;
  }

  testing::TempDir dir_;
};

TEST_F(StoredRun, ThroughputPerRankAndJobAreTheStoredRates) {
  const RunData run = load();
  const auto panel = build_panel(PanelKind::throughput, {&run}, {});
  ASSERT_TRUE(panel.empty_reason.empty()) << panel.empty_reason;
  // DDP: each rank's samples_per_s counts both replicas; a rank's own rate is half.
  const double rate0 = step_body(0, 17)["samples_per_s"], rate1 = step_body(1, 17)["samples_per_s"];
  EXPECT_DOUBLE_EQ(at_step(series_named(panel, "rank 0"), 17), rate0 / 2);
  EXPECT_DOUBLE_EQ(at_step(series_named(panel, "rank 1"), 17), rate1 / 2);
  EXPECT_DOUBLE_EQ(at_step(series_named(panel, "job"), 17), rate0 / 2 + rate1 / 2);
  ASSERT_EQ(panel.references.size(), 1u);
  EXPECT_NE(panel.references[0].label.find("steady after warm-up"), std::string::npos);
  // The steady throughput: the lead rank's samples after warm-up (5 of the 40
  // steps) over their wall time, 128 samples / (128 / samples_per_s) each.
  double samples = 0, seconds = 0;
  for (int step = 6; step <= kSteps; ++step) {
    samples += 128;
    seconds += 128 / step_body(0, step)["samples_per_s"].get<double>();
  }
  EXPECT_NEAR(panel.references[0].y, samples / seconds, 1e-9 * samples / seconds);
}

TEST_F(StoredRun, BandwidthIsBytesOverStepTime) {
  const RunData run = load();
  const auto panel = build_panel(PanelKind::bandwidth, {&run}, {});
  ASSERT_TRUE(panel.empty_reason.empty()) << panel.empty_reason;
  const json body = step_body(1, 23);
  const double expected = body["bytes_sent"].get<double>() / body["step_ms"].get<double>() / 1000;
  EXPECT_DOUBLE_EQ(at_step(series_named(panel, "rank 1 sent"), 23), expected);
  const double received = body["bytes_recv"].get<double>() / body["step_ms"].get<double>() / 1000;
  EXPECT_DOUBLE_EQ(at_step(series_named(panel, "rank 1 received"), 23), received);
}

TEST_F(StoredRun, StepTimeBreakdownSumsToStepTime) {
  const RunData run = load();
  PanelOptions options;
  options.breakdown_rank = 1;
  const auto panel = build_panel(PanelKind::step_time, {&run}, options);
  ASSERT_TRUE(panel.empty_reason.empty()) << panel.empty_reason;
  int areas = 0;
  for (int step = 1; step <= kSteps; ++step) {
    double sum = 0;
    areas = 0;
    for (const auto& s : panel.series)
      if (s.style == SeriesStyle::stacked_area) sum += at_step(s, step), ++areas;
    const double step_ms = step_body(1, step)["step_ms"];
    EXPECT_NEAR(sum, step_ms, 0.03 * step_ms) << "step " << step;
  }
  EXPECT_EQ(areas, 5);  // data, forward, backward, exposed comm, optimizer
  EXPECT_DOUBLE_EQ(at_step(series_named(panel, "whole step"), 9), step_body(1, 9)["step_ms"]);
}

TEST_F(StoredRun, SmoothingZeroIsRawAndPointSixIsTheDebiasedEma) {
  const RunData run = load();
  PanelOptions raw_options;
  const auto raw = build_panel(PanelKind::loss, {&run}, raw_options);
  const Series& loss = series_named(raw, "loss (rank 0)");
  ASSERT_EQ(loss.y->size(), size_t(kSteps));
  for (int step = 1; step <= kSteps; ++step)
    EXPECT_DOUBLE_EQ(at_step(loss, step), step_body(0, step)["loss"].get<double>());
  EXPECT_FALSE(has_series(raw, "loss (rank 0) (raw)"));

  PanelOptions smoothed_options;
  smoothed_options.smoothing = 0.6;
  const auto smoothed = build_panel(PanelKind::loss, {&run}, smoothed_options);
  const Series& ema = series_named(smoothed, "loss (rank 0)");
  const Series& faint = series_named(smoothed, "loss (rank 0) (raw)");
  EXPECT_EQ(faint.style, SeriesStyle::faint_raw);
  // TensorBoard's rule, written out here on its own.
  double last = 0;
  for (int step = 1; step <= kSteps; ++step) {
    const double y = step_body(0, step)["loss"];
    last = last * 0.6 + 0.4 * y;
    const double debiased = last / (1 - std::pow(0.6, step));
    EXPECT_NEAR(at_step(ema, step), debiased, 1e-12) << "step " << step;
    EXPECT_DOUBLE_EQ(at_step(faint, step), y);
  }
}

TEST_F(StoredRun, XIsTheStepTheNodesClockOrSecondsSinceTheStart) {
  const RunData run = load();
  for (const XMode mode : {XMode::step, XMode::wall_time, XMode::relative_time}) {
    PanelOptions options;
    options.x = mode;
    const auto panel = build_panel(PanelKind::throughput, {&run}, options);
    const Series& rank1 = series_named(panel, "rank 1");
    ASSERT_EQ(rank1.x->size(), size_t(kSteps)) << name_of(mode);
    const double recorded_time = step_body(1, 12)["time"];
    const double expected = mode == XMode::step        ? 12.0
                            : mode == XMode::wall_time ? recorded_time
                                                       : recorded_time - kStartTime;
    EXPECT_NEAR((*rank1.x)[11], expected, 1e-6) << name_of(mode);
    EXPECT_FALSE(panel.x_title.empty());
  }
}

TEST_F(StoredRun, RankFilterLeavesOutTheOtherRanks) {
  const RunData run = load();
  PanelOptions options;
  options.ranks = std::set<int64_t>{1};
  for (const PanelKind kind : {PanelKind::throughput, PanelKind::bandwidth}) {
    const auto panel = build_panel(kind, {&run}, options);
    for (const auto& s : panel.series)
      EXPECT_EQ(s.name.find("rank 0"), std::string::npos) << name_of(kind) << ": " << s.name;
  }
  EXPECT_TRUE(has_series(build_panel(PanelKind::throughput, {&run}, options), "rank 1"));
}

TEST_F(StoredRun, MalformedRecordsAreSkippedAndCounted) {
  const RunData run = load();
  int64_t skipped = 0;
  for (const auto& [why, count] : run.skipped_records) skipped += count;
  EXPECT_EQ(skipped, 2);
  EXPECT_EQ(run.ranks.at(1).rows(), size_t(kSteps));
}

TEST_F(StoredRun, SystemRecordsBecomeRatesFromTheCumulativeCounters) {
  const RunData run = load();
  const SystemColumns& node = run.systems.at("local");
  ASSERT_EQ(node.rows(), 4u);
  EXPECT_TRUE(std::isnan(node.nic_rx_mb_s[0]));
  EXPECT_DOUBLE_EQ(node.nic_rx_mb_s[3], (9e6 - 4e6) / 1.0 / 1e6);
  EXPECT_DOUBLE_EQ(node.nic_tx_mb_s[2], 2.0);
  const auto system = build_panel(PanelKind::system, {&run}, {});
  EXPECT_TRUE(system.empty_reason.empty()) << system.empty_reason;
}

TEST_F(StoredRun, AnEmptyPanelSaysWhy) {
  const RunData run = load();
  // A CPU run without codecs has no pipeline fields: the communication panel
  // still has comm_ms, but memory has no mem_* and no RSS of a GPU.
  for (const PanelKind kind : kAllPanels) {
    const auto panel = build_panel(kind, {&run}, {});
    EXPECT_TRUE(!panel.series.empty() || !panel.empty_reason.empty()) << name_of(kind);
  }
}

// Compared beside a DDP run, a one-rank run has no traffic: its line of
// zeros is left out and a note names it; with no run that sent anything,
// the panel says why instead of drawing an empty frame.
TEST_F(StoredRun, ComparedBandwidthNamesARunThatSentNothing) {
  {
    Store store(database());
    const RunRow run = ddp_run_row("one-rank-run", "alone", 1);
    store.create_run(run);
    int64_t seq = 0;
    auto append = [&](const std::string& type, json body) {
      body["type"] = type;
      store.append_record(run.id, RecordRow{++seq, "local", 0, type, body.dump()});
    };
    append("start", {{"rank", 0}, {"world_size", 1}, {"device", "cpu"}, {"time", kStartTime}});
    for (int step = 1; step <= 5; ++step) {
      json body = step_body(0, step);
      body["bytes_sent"] = 0.0;
      body["bytes_recv"] = 0.0;
      body.erase("algbw_gbps");
      body.erase("busbw_gbps");
      append("step", body);
    }
    store.flush();
  }
  const RunData ddp = load();
  const Store store(database(), controller::StoreAccess::read_only);
  const RunData alone = load_run(store, "one-rank-run");

  const auto beside = build_panel(PanelKind::bandwidth, {&ddp, &alone}, {});
  EXPECT_TRUE(beside.empty_reason.empty()) << beside.empty_reason;
  ASSERT_FALSE(beside.series.empty());
  for (const auto& s : beside.series) EXPECT_NE(s.run, "one-rank-run") << s.name;
  ASSERT_EQ(beside.notes.size(), 1u);
  EXPECT_EQ(beside.notes[0],
            "alone \u00b7 -run: one rank (strategy ddp): nothing crosses between ranks");

  const auto both_alone = build_panel(PanelKind::bandwidth, {&alone, &alone}, {});
  EXPECT_TRUE(both_alone.series.empty());
  EXPECT_NE(both_alone.empty_reason.find("nothing crosses between ranks"), std::string::npos)
      << both_alone.empty_reason;
}

// CSV: one row a point, every value as stored.
TEST_F(StoredRun, CsvHoldsEveryStoredValue) {
  const RunData run = load();
  const auto panel = build_panel(PanelKind::bandwidth, {&run}, {});
  std::istringstream csv(panel_csv(panel));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("run,series,unit,step,value", 0), 0u) << line;
  int rows = 0, checked = 0;
  while (std::getline(csv, line)) {
    ++rows;
    std::vector<std::string> cells;
    std::stringstream cell_in(line);
    for (std::string cell; std::getline(cell_in, cell, ',');) cells.push_back(cell);
    ASSERT_GE(cells.size(), 5u) << line;
    if (cells[1] != "rank 0 sent") continue;
    int step = 0;
    double value = 0;
    std::from_chars(cells[3].data(), cells[3].data() + cells[3].size(), step);
    std::from_chars(cells[4].data(), cells[4].data() + cells[4].size(), value);
    const json body = step_body(0, step);
    EXPECT_EQ(value, body["bytes_sent"].get<double>() / body["step_ms"].get<double>() / 1000)
        << line;
    ++checked;
  }
  EXPECT_EQ(checked, kSteps);
  size_t points = 0;
  for (const auto& s : panel.series) points += s.y->size();
  EXPECT_EQ(rows, int(points));
}

TEST_F(StoredRun, RendersValidPngAndSvgWithPaths) {
  RenderRequest request;
  request.database = database().toStdString();
  request.runs = {"ddp-run"};
  request.panel = PanelKind::step_time;
  request.size = QSize(800, 450);
  request.output = QString::fromStdString((dir_.path() / "step_time.png").string());
  ASSERT_EQ(render_panel(request), QString());
  const QImage image(request.output);
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), QSize(800, 450));

  request.output = QString::fromStdString((dir_.path() / "step_time.svg").string());
  ASSERT_EQ(render_panel(request), QString());
  QFile svg(request.output);
  ASSERT_TRUE(svg.open(QIODevice::ReadOnly));
  QXmlStreamReader xml(&svg);
  int paths = 0;
  while (!xml.atEnd())
    if (xml.readNext() == QXmlStreamReader::StartElement && xml.name() == QLatin1String("path"))
      ++paths;
  EXPECT_FALSE(xml.hasError()) << xml.errorString().toStdString();
  EXPECT_GT(paths, 5);
}

TEST_F(StoredRun, RenderNamesWhatIsWrong) {
  RenderRequest request;
  request.database = database().toStdString();
  request.runs = {"no-such-run"};
  request.output = QString::fromStdString((dir_.path() / "x.png").string());
  EXPECT_TRUE(render_panel(request).contains("no-such-run"));
  request.runs = {"ddp-run"};
  request.output = "/proc/no/such/dir/x.png";
  EXPECT_TRUE(render_panel(request).contains("/proc/no/such/dir/x.png"));
  request.output = QString::fromStdString((dir_.path() / "x.gif").string());
  EXPECT_FALSE(render_panel(request).isEmpty());
  request.database = (dir_.path() / "missing.db").string();
  request.output = QString::fromStdString((dir_.path() / "x.png").string());
  EXPECT_TRUE(render_panel(request).contains("missing.db"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "missing.db"));  // a view creates nothing
}

// The step buckets a long run is first painted from are kept by the store
// as records arrive: each holds the mean, lowest and highest of its steps.
TEST_F(StoredRun, CoarseLoadHoldsEachBucketsMeanAndExtremes) {
  const Store store(database(), controller::StoreAccess::read_only);
  const RunData coarse = load_run_coarse(store, "ddp-run");
  ASSERT_TRUE(coarse.coarse);
  const RankColumns& rank1 = coarse.ranks.at(1);
  ASSERT_EQ(rank1.rows(), 1u);  // 40 steps: one bucket of 256
  double sum = 0, low = 1e300, high = 0;
  for (int step = 1; step <= kSteps; ++step) {
    const double step_ms = step_body(1, step)["step_ms"];
    sum += step_ms, low = std::min(low, step_ms), high = std::max(high, step_ms);
  }
  EXPECT_NEAR(rank1.field("step_ms")->front(), sum / kSteps, 1e-9);
  EXPECT_DOUBLE_EQ(rank1.low.at("step_ms").front(), low);
  EXPECT_DOUBLE_EQ(rank1.high.at("step_ms").front(), high);
  // Step records of every rank: 2 x 40 (the record without a step has no bucket).
  EXPECT_FALSE(has_more_steps_than(store, "ddp-run", 2 * kSteps));
  EXPECT_TRUE(has_more_steps_than(store, "ddp-run", 2 * kSteps - 1));
}

// The throughput panel's median label sits inside the plot, right-aligned,
// whatever the panel's size: it once began left of the plot and covered the
// y axis' title when the plot was narrower than the label. And it covers no
// data: it sits in a band at the top that the y range keeps free (it sat on
// the job's line, over the data).
TEST_F(StoredRun, ReferenceLabelsStayInsideThePlotAtAnySize) {
  const RunData run = load();
  PanelWidget widget(nullptr);
  widget.setPanel(prepare(build_panel(PanelKind::throughput, {&run}, {})));
  ASSERT_EQ(widget.panel()->description.references.size(), 1u);
  for (const QSize size : {QSize(320, 260), QSize(420, 300), QSize(700, 360), QSize(1500, 500)}) {
    SCOPED_TRACE(std::to_string(size.width()) + "x" + std::to_string(size.height()));
    widget.resize(size);
    widget.show();
    // The chart's layout at the new size is a posted event; the labels are
    // placed when the plot area it gives changes.
    QCoreApplication::sendPostedEvents();
    QCoreApplication::processEvents();
    (void)widget.grab();
    const QRectF plot = widget.chart()->plotArea();
    ASSERT_GT(plot.width(), 50);
    const QGraphicsTextItem* label = nullptr;
    for (auto* item : widget.chart()->childItems())
      if (auto* text = dynamic_cast<QGraphicsTextItem*>(item);
          text && text->toPlainText().contains("steady after warm-up"))
        label = text;
    ASSERT_TRUE(label);
    EXPECT_TRUE(label->isVisible());
    const QRectF box = label->mapRectToParent(label->boundingRect());
    EXPECT_GE(box.left(), plot.left()) << "plot from " << plot.left();
    EXPECT_LE(box.right(), plot.right() + 0.5) << "plot to " << plot.right();
    EXPECT_GE(box.top(), plot.top() - 0.5);
    EXPECT_LE(box.bottom(), plot.bottom() + 0.5);
    // Right-aligned at the line's end (the plot's right edge), unless it fills the plot.
    EXPECT_NEAR(box.right(), plot.right() - 4, 1.0);
    for (auto* series : widget.chart()->series()) {
      auto* line = qobject_cast<QXYSeries*>(series);
      if (!line || !line->isVisible()) continue;
      for (const QPointF& p : line->points()) {
        const QPointF at = widget.chart()->mapToPosition(p, line);
        EXPECT_FALSE(box.contains(at)) << line->name().toStdString() << " at (" << p.x() << ", "
                                       << p.y() << ") lies under the label";
      }
    }
  }
  // The legend, which cuts long names ("steady aft..."), names the line
  // only: the figure is in the label beside it.
  QStringList entries;
  for (const auto* marker : widget.chart()->legend()->markers()) entries << marker->label();
  EXPECT_TRUE(entries.contains("steady")) << entries.join(" | ").toStdString();
}

// An elastic pipeline's change of layout (one transition record a rank) is
// one mark on every panel, at its step, or its time since the start.
TEST_F(StoredRun, ALayoutChangeIsMarkedOnEveryPanelAtItsStepOrTime) {
  {
    Store store(database());
    int64_t seq = 1000;
    for (int rank : {0, 1}) {
      const json body = {{"type", "transition"}, {"rank", rank},          {"step", 21},
                         {"from_stages", 2},     {"from_replicas", 1},    {"to_stages", 1},
                         {"to_replicas", 2},     {"time", kStartTime + 3}};
      store.append_record("ddp-run", RecordRow{++seq, "local", rank, "transition", body.dump()});
    }
    store.flush();
  }
  RunData run = load();
  ASSERT_EQ(run.layout_changes.size(), 1u);
  for (const PanelKind kind : kAllPanels) {
    const auto panel = build_panel(kind, {&run}, {});
    SCOPED_TRACE(panel.title);
    if (!panel.empty_reason.empty()) continue;
    ASSERT_EQ(panel.marks.size(), 1u);
    EXPECT_EQ(panel.marks[0].x, 21);
    EXPECT_EQ(panel.marks[0].label, "layout 2x1 \u2192 1x2");
  }
  // A rank the change moved is named by where it started and where it went.
  auto& moved = run.ranks.at(1);
  moved.stage = 1;
  moved.replica = 0;
  moved.last_stage = 0;
  moved.last_replica = 1;
  EXPECT_TRUE(has_series(build_panel(PanelKind::throughput, {&run}, {}),
                         "rank 1 (stage 1\u21920, replica 0\u21921)"));
  PanelOptions relative;
  relative.x = XMode::relative_time;
  const auto by_time = build_panel(PanelKind::loss, {&run}, relative);
  ASSERT_EQ(by_time.marks.size(), 1u);
  EXPECT_DOUBLE_EQ(by_time.marks[0].x, 3.0);

  // Drawn across the plot: a line of two points at step 21 spanning the axis.
  PanelWidget widget(nullptr);
  widget.setPanel(prepare(build_panel(PanelKind::throughput, {&run}, {})));
  widget.resize(700, 360);
  widget.show();
  QCoreApplication::sendPostedEvents();
  QCoreApplication::processEvents();
  (void)widget.grab();
  const QXYSeries* mark = nullptr;
  for (auto* series : widget.chart()->series())
    if (series->name() == "layout 2x1 \u2192 1x2") mark = qobject_cast<QXYSeries*>(series);
  ASSERT_TRUE(mark);
  ASSERT_EQ(mark->points().size(), 2);
  EXPECT_EQ(mark->points()[0].x(), 21);
  EXPECT_EQ(mark->points()[1].x(), 21);
  const QPointF low =
      widget.chart()->mapToPosition(mark->points()[0], const_cast<QXYSeries*>(mark));
  const QPointF high =
      widget.chart()->mapToPosition(mark->points()[1], const_cast<QXYSeries*>(mark));
  const QRectF plot = widget.chart()->plotArea();
  EXPECT_NEAR(low.y(), plot.bottom(), 1.0);
  EXPECT_NEAR(high.y(), plot.top(), 1.0);
}

// A sweep of 22 runs drew 22 throughput labels over each other and over the
// plot, and four compared runs' two-line labels covered its upper half: a
// comparison's legend entries carry the figures, with no label; one run
// keeps its label.
TEST_F(StoredRun, ManyComparedRunsNameTheirSteadyThroughputInTheLegendOnly) {
  const RunData run = load();
  const auto one = build_panel(PanelKind::throughput, {&run}, {});
  ASSERT_EQ(one.references.size(), 1u);
  EXPECT_NE(one.references[0].label.find("steady after warm-up"), std::string::npos);
  const auto two = build_panel(PanelKind::throughput, {&run, &run}, {});
  ASSERT_EQ(two.references.size(), 2u);
  for (const auto& reference : two.references) {
    EXPECT_TRUE(reference.label.empty()) << reference.label;
    EXPECT_NE(reference.legend.find(" steady "), std::string::npos) << reference.legend;
  }
  const auto five = build_panel(PanelKind::throughput, {&run, &run, &run, &run, &run}, {});
  ASSERT_EQ(five.references.size(), 5u);
  for (const auto& reference : five.references) {
    EXPECT_TRUE(reference.label.empty()) << reference.label;
    EXPECT_NE(reference.legend.find(" steady "), std::string::npos) << reference.legend;
  }
  PanelWidget widget(nullptr);
  widget.setPanel(prepare(five));
  widget.resize(900, 400);
  widget.show();
  QCoreApplication::sendPostedEvents();
  (void)widget.grab();
  for (auto* item : widget.chart()->childItems()) {
    auto* text = dynamic_cast<QGraphicsTextItem*>(item);
    if (text && text->isVisible()) {
      EXPECT_FALSE(text->toPlainText().contains("steady"));
    }
  }
}

// A sweep's points share a long name ("study-...-213206#1" to "#2") that the
// legend cut before the part that tells them apart: it is left out of the
// series' names and said once in a note.
TEST_F(StoredRun, ComparedRunsAreNamedWithoutWhatAllTheirNamesBeginWith) {
  RunData first = load(), second = load();
  first.run.experiment_name = "pipeline-vs-dp-cpu-20261123-213206#1";
  second.run.experiment_name = "pipeline-vs-dp-cpu-20261123-213206#2";
  const auto panel = build_panel(PanelKind::throughput, {&first, &second}, {});
  EXPECT_TRUE(has_series(panel, "#1 \u00b7 -run job"));
  EXPECT_TRUE(has_series(panel, "#2 \u00b7 -run job"));
  ASSERT_EQ(panel.references.size(), 2u);
  // A comparison's legend entry carries the throughput's figure after the name.
  EXPECT_EQ(panel.references[0].legend.rfind("#1 \u00b7 -run steady ", 0), 0u)
      << panel.references[0].legend;
  EXPECT_EQ(panel.notes.back(),
            "runs named without \"pipeline-vs-dp-cpu-20261123-213206\", which all their names "
            "begin with");
  // Names that share little ("ddp1", "ddp2-b32") are left whole.
  first.run.experiment_name = "ddp1";
  second.run.experiment_name = "ddp2-b32";
  EXPECT_TRUE(has_series(build_panel(PanelKind::throughput, {&first, &second}, {}),
                         "ddp1 \u00b7 -run job"));
}

// PlotJuggler's tracker: the mouse over one panel puts a cursor at that x on
// every panel of the same sync, each listing its visible series' values there.
TEST_F(StoredRun, HoverOnOnePanelShowsEachPanelsValuesAtThatStep) {
  const RunData run = load();
  PanelSync sync;
  PanelWidget throughput(&sync), bandwidth(&sync);
  throughput.setPanel(prepare(build_panel(PanelKind::throughput, {&run}, {})));
  bandwidth.setPanel(prepare(build_panel(PanelKind::bandwidth, {&run}, {})));
  for (auto* widget : {&throughput, &bandwidth}) {
    widget->resize(900, 400);
    widget->show();
  }
  QCoreApplication::sendPostedEvents();
  QCoreApplication::processEvents();
  (void)throughput.grab();
  // Where step 17 is drawn on the throughput panel, in its view's pixels.
  auto* chart = throughput.chart();
  ASSERT_FALSE(chart->series().isEmpty());
  const QPointF in_chart = chart->mapToPosition(QPointF(17, 0), chart->series().first());
  const QPoint in_view = throughput.chartView()->mapFromScene(chart->mapToScene(in_chart));
  QTest::mouseMove(throughput.chartView()->viewport(), in_view);
  QCoreApplication::processEvents();

  const QString text = throughput.hoverText();
  EXPECT_TRUE(text.startsWith("step 17")) << text.toStdString();
  // The value it lists for rank 0 is the stored rate at that step.
  const QString line = text.section('\n', 1, 1);
  ASSERT_TRUE(line.startsWith("rank 0: ")) << text.toStdString();
  const double shown = line.section(": ", 1, 1).section(' ', 0, 0).toDouble();
  const double stored = step_body(0, 17)["samples_per_s"].get<double>() / 2;
  EXPECT_NEAR(shown, stored, 0.001 * stored) << text.toStdString();
  // The other panel of the sync follows with its own series at the same step.
  EXPECT_TRUE(bandwidth.hoverText().startsWith("step 17")) << bandwidth.hoverText().toStdString();
  EXPECT_TRUE(bandwidth.hoverText().contains("rank 1 sent: "))
      << bandwidth.hoverText().toStdString();
}

}  // namespace
}  // namespace flotilla::charts
