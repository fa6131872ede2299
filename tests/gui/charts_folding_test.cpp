// The dashboard's row limits on a long live run (charts::RowLimits): the
// rows a rank keeps stop growing with the run, the recent steps stay exact,
// the older ones are their buckets' means, and the panels say so.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <regex>
#include <vector>

#include "flotilla/charts/panel.h"
#include "flotilla/charts/run_loader.h"
#include "run_rows.h"

namespace flotilla::charts {
namespace {

using controller::RecordRow;
using nlohmann::json;
using testing::ddp_run_row;

constexpr double kStartTime = 1'700'000'000.0;  // the node's clock at the start records

// A live run followed for long (RowLimits): each rank keeps its newest steps
// one a row and the older ones as means over buckets of steps, so the rows
// kept stop growing with the run, while every step is still counted and
// drawn: the recent ones as they were, the older ones as their bucket's mean.
class FoldedRun : public ::testing::Test {
 protected:
  static constexpr int kRanks = 2;
  static RowLimits limits() {
    RowLimits l;
    l.recent_steps = 512;
    l.coarse_rows = 128;
    l.first_bucket_steps = 8;
    l.recent_system_seconds = 600;
    l.first_bucket_seconds = 4;
    return l;
  }
  // A field linear in the step (its bucket mean is its value at the mean
  // step) and one that is not (step % 7, whose means need every step).
  static double rate(int rank, int step) { return 1000.0 + 0.01 * step + 100.0 * rank; }
  static double wobble(int step) { return double(step % 7); }

  // Steps up to `steps` for each rank, as the dashboard's polls add them: a
  // few hundred records at a time.
  void add_steps_up_to(RunData& data, int steps) {
    std::vector<RecordRow> batch;
    for (; step_ < steps; ++step_) {
      const int step = step_ + 1;
      for (int rank = 0; rank < kRanks; ++rank) {
        const json body = {{"type", "step"},
                           {"step", step},
                           {"time", kStartTime + step * 0.01},
                           {"samples", 64},
                           {"samples_per_s", rate(rank, step)},
                           {"step_ms", 10.0},
                           {"wobble", wobble(step)}};
        batch.push_back(RecordRow{++seq_, "local", rank, "step", body.dump()});
      }
      if (step % 5 == 0) {
        const json system = {{"type", "system"},
                             {"time", kStartTime + step * 0.01},
                             {"cpu_util", 0.5},
                             {"rank_rss", {{"0", 1e8 + step}, {"1", 2e8}}}};
        batch.push_back(RecordRow{++seq_, "local", -1, "system", system.dump()});
      }
      if (batch.size() >= 300) add_records(data, batch), batch.clear();
    }
    add_records(data, batch);
  }

  static RunData live_run(std::optional<RowLimits> limits) {
    RunData data;
    data.run = ddp_run_row("long-run", "soak", kRanks);
    data.shape = job_shape_of(data.run);
    data.limits = limits;
    return data;
  }

  int step_ = 0;
  int64_t seq_ = 0;
};

TEST_F(FoldedRun, RowsKeptStayUnderABoundAsTheRunGrows) {
  RunData data = live_run(limits());
  const RowLimits l = limits();
  const size_t bound = size_t(l.recent_steps * 5 / 4) + l.coarse_rows;
  std::vector<size_t> rows;
  for (const int steps : {4000, 32000, 128000}) {
    add_steps_up_to(data, steps);
    SCOPED_TRACE(std::to_string(steps) + " steps");
    for (const auto& [r, rank] : data.ranks) {
      EXPECT_LE(rank.rows(), bound) << "rank " << r;
      // Every step is in some row: a folded row holds its bucket's steps.
      int64_t held = 0;
      for (size_t i = 0; i < rank.rows(); ++i) held += rank.steps_in(i);
      EXPECT_EQ(held, steps) << "rank " << r;
      EXPECT_EQ(rank.records, steps) << "rank " << r;
    }
    EXPECT_EQ(data.step_records(), int64_t(kRanks) * steps);
    rows.push_back(data.ranks.at(0).rows());
    // A node's system samples too (one each 0.05 s of the node's clock here).
    const SystemColumns& node = data.systems.at("local");
    EXPECT_LE(node.rows(), size_t(l.recent_system_seconds / 0.05 * 5 / 4) + l.coarse_rows);
    int64_t samples = 0;
    for (size_t i = 0; i < node.rows(); ++i)
      samples += i < node.folded_rows ? node.folded_samples[i] : 1;
    EXPECT_EQ(samples, steps / 5);
    // The facts' RSS peak is the highest sample, not the highest bucket mean.
    EXPECT_DOUBLE_EQ(node.rank_rss_peak, 2e8);
  }
  // 32 times the steps, not 32 times the rows.
  EXPECT_LE(rows[2], bound);
  EXPECT_GT(data.step_bucket, l.first_bucket_steps);  // the buckets widened to stay few
  // Without limits the same run keeps a row a step.
  RunData full = live_run(std::nullopt);
  step_ = 0, seq_ = 0;
  add_steps_up_to(full, 4000);
  EXPECT_EQ(full.ranks.at(0).rows(), 4000u);
  EXPECT_EQ(full.ranks.at(0).folded_rows, 0u);
}

TEST_F(FoldedRun, RecentStepsStayExactAndOlderOnesAreTheirBucketsMeans) {
  RunData data = live_run(limits());
  constexpr int kSteps = 20000;
  add_steps_up_to(data, kSteps);
  const RankColumns& rank = data.ranks.at(1);
  ASSERT_GT(rank.folded_rows, 0u);
  ASSERT_GT(data.step_bucket, 0);
  // The newest recent_steps steps are rows of their own, as recorded.
  const size_t fine = rank.rows() - rank.folded_rows;
  ASSERT_GE(fine, size_t(limits().recent_steps));
  for (size_t i = rank.folded_rows; i < rank.rows(); ++i) {
    const int step = int(rank.step[i]);
    ASSERT_EQ(rank.step[i], double(step));
    EXPECT_DOUBLE_EQ(rank.field("samples_per_s")->at(i), rate(1, step));
    EXPECT_DOUBLE_EQ(rank.field("wobble")->at(i), wobble(step));
  }
  EXPECT_EQ(rank.step.back(), double(kSteps));
  EXPECT_EQ(rank.step[rank.folded_rows], data.folded_before_step);
  // Each folded row holds the steps of its bucket, and their means.
  const double width = double(data.step_bucket);
  double previous_bucket = -1;
  for (size_t i = 0; i < rank.folded_rows; ++i) {
    const double bucket = std::floor(rank.step[i] / width);
    EXPECT_GT(bucket, previous_bucket) << "row " << i;
    previous_bucket = bucket;
    // The last bucket may end early: at the steps folded so far.
    const int first = std::max(1, int(bucket * width));
    const int last = int(std::min((bucket + 1) * width, data.folded_before_step)) - 1;
    double steps = 0, wobbles = 0, count = 0;
    for (int s = first; s <= last; ++s) steps += s, wobbles += wobble(s), ++count;
    SCOPED_TRACE("folded row " + std::to_string(i) + ", steps " + std::to_string(first) + ".." +
                 std::to_string(last));
    EXPECT_EQ(rank.folded_steps[i], int64_t(count));
    EXPECT_NEAR(rank.step[i], steps / count, 1e-6);
    EXPECT_NEAR(rank.field("wobble")->at(i), wobbles / count, 1e-9);
    EXPECT_NEAR(rank.field("samples_per_s")->at(i), rate(1, 0) + 0.01 * steps / count, 1e-6);
  }
}

TEST_F(FoldedRun, PanelsDrawTheFoldedStepsAndSaySo) {
  RunData data = live_run(limits());
  add_steps_up_to(data, 20000);
  const auto panel = build_panel(PanelKind::throughput, {&data}, {});
  ASSERT_TRUE(panel.empty_reason.empty()) << panel.empty_reason;
  const auto job_it = std::find_if(panel.series.begin(), panel.series.end(),
                                   [](const Series& s) { return s.name == "job"; });
  ASSERT_NE(job_it, panel.series.end());
  const Series& job = *job_it;
  // The job line covers the folded steps too: at each of rank 0's rows, the
  // sum of both ranks' own rates (DDP: samples_per_s / 2), bucket or step.
  const RankColumns& lead = data.ranks.at(0);
  ASSERT_EQ(job.x->size(), lead.rows());
  for (const size_t i : {size_t(0), lead.folded_rows - 1, lead.folded_rows, lead.rows() - 1}) {
    const double step = lead.step[i];
    EXPECT_NEAR((*job.y)[i], (rate(0, 0) + rate(1, 0)) / 2 + 0.01 * step, 1e-6) << "row " << i;
  }
  const bool noted = std::any_of(panel.notes.begin(), panel.notes.end(), [](const std::string& n) {
    return n.find("drawn as means of") != std::string::npos;
  });
  EXPECT_TRUE(noted);
  // Numbers as a person writes them: "steps before 4,098", not "4098.00000".
  for (const auto& note : panel.notes) {
    if (note.find("drawn as means of") == std::string::npos) continue;
    EXPECT_TRUE(std::regex_search(
        note,
        std::regex("^steps before [1-9][0-9]{0,2}(,[0-9]{3})* drawn as means of [0-9]+-step")))
        << note;
  }
  // The steady throughput counts each bucket as the steps it holds: the
  // rate rises 0.01 a step, so it lands within a bucket's rise of the exact one.
  RunData full = live_run(std::nullopt);
  step_ = 0, seq_ = 0;
  add_steps_up_to(full, 20000);
  const auto exact = build_panel(PanelKind::throughput, {&full}, {});
  ASSERT_EQ(panel.references.size(), 1u);
  ASSERT_EQ(exact.references.size(), 1u);
  EXPECT_NEAR(panel.references[0].y, exact.references[0].y, 0.01 * double(data.step_bucket));
  EXPECT_NE(panel.references[0].y, 0);
}

}  // namespace
}  // namespace flotilla::charts
