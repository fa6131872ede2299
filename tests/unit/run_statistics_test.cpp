// The numbers of the compare table, derived from records (run_statistics.h),
// each against a value computed by hand in the comment beside it; records go
// through their JSON lines and back, as they come out of the store.
#include <gtest/gtest.h>

#include <cmath>

#include "flotilla/protocol/record_reading.h"
#include "flotilla/protocol/run_statistics.h"
#include "step_records.h"

namespace flotilla::metrics {
namespace {

using records::Step;

Step read_back(const Step& s) {
  auto again = records::step_from_line(records::to_line(s));
  EXPECT_TRUE(again.has_value()) << records::to_line(s);
  return again.value_or(Step{});
}

// A DDP rank's step: 20 ms = data 2 + forward 6 + backward 8 + comm 3 +
// optimizer 1, 12 ms of communication in all (9 of them hidden), 4
// operations a step. Warm-up steps take 100 ms and send nothing.
Step ddp_step(int64_t rank, int64_t step, bool measured) {
  Step s = testing::twenty_ms_step(rank, step);
  s.epoch = step <= 4 ? 0 : (step <= 7 ? 1 : 2);
  s.samples = 64;
  s.loss = 1.0;
  s.step_ms = measured ? 20 : 100;
  s.comm_per_s = measured ? 4 / 0.020 : 0;
  s.samples_per_s = measured ? 100.0 + step : 1.0;
  s.bytes_sent = measured ? (rank == 0 ? 1000 : 3000) : 0;
  s.busbw_gbps = measured ? static_cast<double>(step - 5) : 0;
  s.mem_peak = 999;
  return read_back(s);
}

RunRecords ddp_run() {
  RunRecords run;
  // 10 steps: warmup_steps(10) = 5, so steps 6..10 are measured.
  for (int64_t rank : {0, 1})
    for (int64_t step = 1; step <= 10; ++step) run.steps.push_back(ddp_step(rank, step, step > 5));
  for (int64_t rank : {0, 1}) {
    const double times[] = {10, 6, 8};
    for (int64_t e = 0; e < 3; ++e) {
      records::Epoch epoch;
      epoch.rank = rank;
      epoch.epoch = e;
      epoch.epoch_s = rank == 0 ? times[e] : 1000;
      epoch.acc_test = rank == 0 ? 0.5 + 0.2 * static_cast<double>(e) : 0.0;
      run.epochs.push_back(*records::epoch_from_line(records::to_line(epoch)));
    }
    records::End end;
    end.rank = rank;
    end.elapsed_s = 30.0 + static_cast<double>(rank);
    run.ends.push_back(*records::end_from_line(records::to_line(end)));
  }
  run.peak_rank_rss = {{0, 500}, {1, 700}};
  return run;
}

TEST(RunStatistics, DdpRunFromTheLeadRankAfterWarmUp) {
  const auto s = run_statistics(ddp_run());
  EXPECT_EQ(s.steps, 10);
  // 64 samples a step at 106..110 samples/s after warm-up: the samples over
  // their wall time (the rates' harmonic mean, as every step is 64 samples).
  double seconds = 0;
  for (int step = 106; step <= 110; ++step) seconds += 64.0 / step;
  EXPECT_DOUBLE_EQ(s.throughput.value(), 5 * 64 / seconds);
  // The last epoch with a record (2) holds steps 8..10: 192 samples, which
  // take 192 / throughput at the steady rate.
  EXPECT_DOUBLE_EQ(s.epoch_samples.value(), 192.0);
  EXPECT_DOUBLE_EQ(s.steady_epoch_s.value(), 192.0 / s.throughput.value());
  EXPECT_DOUBLE_EQ(s.step_ms.value(), 20.0);
  // 2, 6, 8, 3, 1 of every 20 ms.
  EXPECT_DOUBLE_EQ(s.step_shares->data, 0.10);
  EXPECT_DOUBLE_EQ(s.step_shares->forward, 0.30);
  EXPECT_DOUBLE_EQ(s.step_shares->backward, 0.40);
  EXPECT_DOUBLE_EQ(s.step_shares->comm, 0.15);
  EXPECT_DOUBLE_EQ(s.step_shares->optimizer, 0.05);
  // 1 - 3/12 of the communication overlapped.
  EXPECT_DOUBLE_EQ(s.comm_hidden.value(), 0.75);
  // Rank 0 sends 1000 bytes a step, rank 1 3000: 2000 per rank.
  EXPECT_DOUBLE_EQ(s.bytes_per_step.value(), 2000.0);
  // 1000 bytes over 4 operations.
  EXPECT_DOUBLE_EQ(s.message_bytes.value(), 250.0);
  // busbw 1..5 over steps 6..10: median 3.
  EXPECT_DOUBLE_EQ(s.busbw_gbps.value(), 3.0);
  // CPU: the steps' own high-water mark (999), above the largest rank RSS
  // the agents' samples saw (700).
  EXPECT_EQ(s.peak_memory.value(), 999);
  EXPECT_EQ(s.memory_source, MemorySource::step_rss);
  // Epochs 10, 6, 8 s: the first left out, median of 6 and 8.
  EXPECT_DOUBLE_EQ(s.epoch_s.value(), 7.0);
  EXPECT_EQ(s.epochs, 3);
  EXPECT_DOUBLE_EQ(s.acc_test.value(), 0.9);
  EXPECT_DOUBLE_EQ(s.run_s.value(), 31.0);
  EXPECT_FALSE(s.pipeline_efficiency.has_value());
  EXPECT_FALSE(s.oom_batch_size.has_value());
}

TEST(RunStatistics, GpuMemoryIsTheAllocatorsPeak) {
  auto run = ddp_run();
  run.gpu = true;
  run.steps[3].mem_peak = 4096;
  const auto s = run_statistics(run);
  EXPECT_EQ(s.peak_memory.value(), 4096);
  EXPECT_EQ(s.memory_source, MemorySource::gpu_peak);
}

TEST(RunStatistics, CpuPeakIsTheAgentsSampleWhereItSawMoreThanTheSteps) {
  auto run = ddp_run();
  run.peak_rank_rss = {{0, 500}, {1, 5000}};
  const auto s = run_statistics(run);
  EXPECT_EQ(s.peak_memory.value(), 5000);
  EXPECT_EQ(s.memory_source, MemorySource::rank_rss);
}

TEST(RunStatistics, ARunShorterThanASampleIsNotTakenAtItsFirstSample) {
  // The agent's one sample came as the rank's process had just started.
  auto run = ddp_run();
  run.peak_rank_rss = {{0, 413696}};
  for (auto& step : run.steps) step.mem_peak = 190824448;
  const auto s = run_statistics(run);
  EXPECT_EQ(s.peak_memory.value(), 190824448);
  EXPECT_EQ(s.memory_source, MemorySource::step_rss);
}

TEST(RunStatistics, CpuRunWithoutSystemRecordsFallsBackToTheStepsRss) {
  auto run = ddp_run();
  run.peak_rank_rss.clear();
  const auto s = run_statistics(run);
  EXPECT_EQ(s.peak_memory.value(), 999);
  EXPECT_EQ(s.memory_source, MemorySource::step_rss);
}

TEST(RunStatistics, OneEpochIsItsOwnTime) {
  RunRecords run;
  records::Epoch epoch;
  epoch.epoch_s = 12.5;
  epoch.acc_test = 0.25;
  run.epochs.push_back(epoch);
  const auto s = run_statistics(run);
  EXPECT_DOUBLE_EQ(s.epoch_s.value(), 12.5);
  EXPECT_DOUBLE_EQ(s.acc_test.value(), 0.25);
}

TEST(RunStatistics, OomRunKeepsTheBatchSizeThatFailedAndHasNoNumbers) {
  RunRecords run;
  records::End end;
  end.outcome = records::Outcome::oom;
  end.batch_size = 512;
  end.elapsed_s = 2.0;
  run.ends.push_back(*records::end_from_line(records::to_line(end)));
  const auto s = run_statistics(run);
  EXPECT_EQ(s.oom_batch_size.value(), 512);
  EXPECT_EQ(s.steps, 0);
  EXPECT_FALSE(s.throughput.has_value());
  EXPECT_FALSE(s.step_ms.has_value());
  EXPECT_FALSE(s.step_shares.has_value());
  EXPECT_FALSE(s.bytes_per_step.has_value());
  EXPECT_FALSE(s.peak_memory.has_value());
  EXPECT_FALSE(s.epoch_s.has_value());
}

TEST(RunStatistics, RunWithoutCommunicationHasNoCommNumbers) {
  RunRecords run;
  for (int64_t step = 1; step <= 6; ++step) {
    Step s;
    s.step = step;
    s.step_ms = 10;
    s.forward_ms = 10;
    s.samples = 5;
    s.samples_per_s = 50;
    run.steps.push_back(s);
  }
  const auto s = run_statistics(run);
  EXPECT_DOUBLE_EQ(s.throughput.value(), 50.0);
  EXPECT_FALSE(s.busbw_gbps.has_value());
  EXPECT_FALSE(s.comm_hidden.has_value());
  EXPECT_FALSE(s.message_bytes.has_value());
  EXPECT_DOUBLE_EQ(s.bytes_per_step.value(), 0.0);
}

// Two stages (ranks 0 and 1) of replica 0 and the two of replica 1, 20
// steps. Each step stage 0 computes 6 of 10 ms, stage 1 8 of 12 ms, so the
// measured efficiency is (6 + 8) / (2 x 12) = 7/12.
RunRecords pipeline_run() {
  RunRecords run;
  for (int64_t step = 1; step <= 20; ++step)
    for (int64_t replica : {0, 1})
      for (int64_t stage : {0, 1}) {
        Step s;
        s.rank = replica * 2 + stage;
        s.replica = replica;
        s.stage = stage;
        s.step = step;
        s.loss = stage == 1 ? std::optional<double>(0.5) : std::nullopt;
        s.busy_ms = replica == 1 ? 100 : (stage == 0 ? 6 : 8);
        s.step_ms = stage == 0 ? 10 : 12;
        s.samples = 4;
        s.samples_per_s = stage == 1 && replica == 0 ? 40 : 1;
        run.steps.push_back(read_back(s));
      }
  return run;
}

TEST(RunStatistics, PipelineEfficiencyIsBusyOverStagesTimesTheStep) {
  const auto s = run_statistics(pipeline_run());
  EXPECT_EQ(s.pipeline_stages, 2);
  EXPECT_DOUBLE_EQ(s.pipeline_efficiency.value(), 14.0 / 24.0);
  // The lead is replica 0's last stage, the only one with the loss.
  EXPECT_EQ(s.steps, 20);
  EXPECT_DOUBLE_EQ(s.throughput.value(), 40.0);
  EXPECT_DOUBLE_EQ(s.step_ms.value(), 12.0);
}

// Seed 001's bandwidth, recv_bytes / recv_time, over every rank's steps after
// warm-up (20 steps, the first 5 warm-up): stage 1 receives 4 MB of activations in
// 2 ms a step, stage 0 2 MB of gradients in 3 ms, so 6 MB / 5 ms = 1.2 GB/s
// and 2.5 ms a receiving rank's step; warm-up steps' 1 MB in 100 ms left out.
TEST(RunStatistics, StageReceiveBandwidthIsBytesOverReceiveTimeAfterWarmUp) {
  auto run = pipeline_run();
  for (auto& s : run.steps) {
    const bool measured = s.step > 5;
    if (s.stage == 1) {
      s.recv_act_bytes = measured ? 4'000'000 : 1'000'000;
      s.recv_act_ms = measured ? 2.0 : 100.0;
    } else {
      s.recv_grad_bytes = measured ? 2'000'000 : 1'000'000;
      s.recv_grad_ms = measured ? 3.0 : 100.0;
    }
    s = read_back(s);
  }
  const auto stats = run_statistics(run);
  EXPECT_DOUBLE_EQ(stats.recv_gbps.value(), 1.2);
  EXPECT_DOUBLE_EQ(stats.recv_ms.value(), 2.5);
  // A run whose ranks receive nothing from stages has neither.
  EXPECT_FALSE(run_statistics(ddp_run()).recv_gbps.has_value());
}

TEST(RunStatistics, PipelineStepMissingAStageIsLeftOut) {
  auto run = pipeline_run();
  // Step 20 of stage 0 lost, and stage 1's busy there would give 8/24.
  run.steps.erase(
      std::remove_if(run.steps.begin(), run.steps.end(),
                     [](const Step& s) { return s.step == 20 && s.stage == 0 && s.replica == 0; }),
      run.steps.end());
  for (auto& s : run.steps)
    if (s.step == 20) s.busy_ms = 1000;
  EXPECT_DOUBLE_EQ(run_statistics(run).pipeline_efficiency.value(), 14.0 / 24.0);
}

TEST(RunStatistics, GpipeBoundIsMOverMPlusPMinusOne) {
  EXPECT_DOUBLE_EQ(gpipe_bound(4, 2).value(), 0.8);  // 4 / 5
  EXPECT_DOUBLE_EQ(gpipe_bound(8, 4).value(), 8.0 / 11.0);
  EXPECT_DOUBLE_EQ(gpipe_bound(1, 1).value(), 1.0);
  EXPECT_FALSE(gpipe_bound(0, 2).has_value());
}

TEST(RunStatistics, SpeedupAndScalingEfficiencyAgainstABaselineWithFewerRanks) {
  // The seed's "Dataparallel-4gpu 627.22/s" against "Dataparallel-2gpu 376.47/s".
  const auto up = speedup(627.22, 376.47);
  EXPECT_NEAR(up.value(), 1.666, 0.001);
  EXPECT_DOUBLE_EQ(scaling_efficiency(up, 4, 2).value(), *up / 2.0);
  EXPECT_DOUBLE_EQ(scaling_efficiency(1.5, 2, 1).value(), 0.75);
  EXPECT_DOUBLE_EQ(scaling_efficiency(1.5, 1, 1).value(), 1.5);
  EXPECT_FALSE(speedup(100.0, std::nullopt).has_value());
  EXPECT_FALSE(speedup(std::nullopt, 100.0).has_value());
  EXPECT_FALSE(speedup(100.0, 0.0).has_value());
  EXPECT_FALSE(scaling_efficiency(std::nullopt, 2, 1).has_value());
}

TEST(RunStatistics, ComputeAndCommunicationTimeAsSeed004SplitsThem) {
  // Seed 004, batch 32: T(1) = 38 s; T(2) = 67 s; T(4) = 121 s.
  const auto two = time_split(67.0, 2, 38.0, 1);
  EXPECT_DOUBLE_EQ(two->compute_s, 19.0);
  EXPECT_DOUBLE_EQ(two->comm_s, 48.0);
  const auto four = time_split(121.0, 4, 38.0, 1);
  EXPECT_DOUBLE_EQ(four->compute_s, 9.5);
  EXPECT_DOUBLE_EQ(four->comm_s, 111.5);
  // Faster than the baseline's share: no negative communication.
  EXPECT_DOUBLE_EQ(time_split(5.0, 2, 20.0, 1)->comm_s, 0.0);
  EXPECT_FALSE(time_split(std::nullopt, 2, 20.0, 1).has_value());
}

TEST(RunStatistics, RingBandwidthReproducesSeed004sTable) {
  // Seed 004: N = 11173962, 1563 steps of batch 32 an epoch, 48 s and 111.5 s
  // of communication on 2 and 4 GPUs: 0.363852 and 0.234954 "GB/s".
  EXPECT_DOUBLE_EQ(ring_allreduce_bytes(100.0, 2), 100.0);
  EXPECT_DOUBLE_EQ(ring_allreduce_bytes(100.0, 4), 150.0);
  EXPECT_DOUBLE_EQ(ring_allreduce_bytes(100.0, 1), 0.0);
  EXPECT_NEAR(ring_bandwidth_gbps(11173962.0, 2, 1563, 48.0).value(), 0.363852, 1e-6);
  EXPECT_NEAR(ring_bandwidth_gbps(11173962.0, 4, 1563, 111.5).value(), 0.234954, 1e-6);
  EXPECT_FALSE(ring_bandwidth_gbps(11173962.0, 1, 1563, 48.0).has_value());
  EXPECT_FALSE(ring_bandwidth_gbps(11173962.0, 2, 1563, 0.0).has_value());
}

TEST(RunStatistics, MeanAndSpreadOverRepeats) {
  const auto m = mean_and_spread({0.9582, 0.9589, 0.9596});
  EXPECT_NEAR(m->mean, 0.9589, 1e-12);
  EXPECT_NEAR(m->spread, 0.0007, 1e-12);  // sqrt((0.0007² + 0²  + 0.0007²) / 2)
  EXPECT_EQ(m->count, 3);
  EXPECT_DOUBLE_EQ(mean_and_spread({0.5})->spread, 0.0);
  EXPECT_FALSE(mean_and_spread({}).has_value());
}

TEST(RunStatistics, LinkBusbwInterpolatesInLogSize) {
  const std::vector<LinkPoint> sweep{{4096, 3.0}, {1024, 1.0}, {65536, 7.0}};
  EXPECT_DOUBLE_EQ(link_busbw_at(sweep, 2048).value(), 2.0);  // halfway from 2^10 to 2^12
  EXPECT_DOUBLE_EQ(link_busbw_at(sweep, 4096).value(), 3.0);
  EXPECT_DOUBLE_EQ(link_busbw_at(sweep, 16384).value(), 5.0);  // halfway from 2^12 to 2^16
  EXPECT_DOUBLE_EQ(link_busbw_at(sweep, 8).value(), 1.0);      // below the sweep
  EXPECT_DOUBLE_EQ(link_busbw_at(sweep, 1e9).value(), 7.0);    // above it
  EXPECT_FALSE(link_busbw_at({}, 1024).has_value());
  EXPECT_FALSE(link_busbw_at(sweep, 0).has_value());
  EXPECT_DOUBLE_EQ(link_utilisation(1.5, 2.0).value(), 0.75);
  EXPECT_FALSE(link_utilisation(1.5, std::nullopt).has_value());
  EXPECT_FALSE(link_utilisation(std::nullopt, 2.0).has_value());
}

// precision's fields: the start record's precision and the dtypes its bytes
// were counted in, a fp16 step's loss scale and skip.
TEST(RecordReading, PrecisionFieldsComeBackFromTheirLines) {
  records::Start start;
  start.precision = "fp16";
  start.gradient_dtype = "float16";
  start.boundary_dtype = "float16";
  const auto read = records::start_from_line(records::to_line(start));
  ASSERT_TRUE(read.has_value()) << records::to_line(start);
  EXPECT_EQ(read->precision, "fp16");
  EXPECT_EQ(read->gradient_dtype, "float16");
  EXPECT_EQ(read->boundary_dtype, "float16");
  Step s = testing::twenty_ms_step(0, 3);
  s.loss_scale = 32768;
  s.skipped = true;
  const auto again = read_back(s);
  EXPECT_EQ(again.loss_scale, 32768);
  EXPECT_TRUE(again.skipped);
  EXPECT_FALSE(read_back(testing::twenty_ms_step(0, 4)).skipped);
}

// Which engine ran a rank: the bundle's or the node's own build (docs/nodes.md).
TEST(RecordReading, TheStartRecordsEngineComesBackAndIsLeftOutWhenUnknown) {
  records::Start start;
  start.engine = "/home/u/.flotilla/engines/0123456789abcdef/torch-2.5.1-42/flotilla-train";
  const auto read = records::start_from_line(records::to_line(start));
  ASSERT_TRUE(read.has_value()) << records::to_line(start);
  EXPECT_EQ(read->engine, start.engine);
  EXPECT_EQ(records::to_line(records::Start{}).find("\"engine\""), std::string::npos);
  EXPECT_FALSE(records::start_from_line(R"({"type":"start","engine":7})").has_value());
}

// The machine a rank ran on (its boot id) and its cores: what tells the
// prediction which ranks share cores (docs/predict.md).
TEST(RecordReading, TheStartRecordsMachineAndCoresComeBackAndAreLeftOutWhenUnknown) {
  records::Start start;
  start.machine = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
  start.cores = 2;
  const auto read = records::start_from_line(records::to_line(start));
  ASSERT_TRUE(read.has_value()) << records::to_line(start);
  EXPECT_EQ(read->machine, start.machine);
  EXPECT_EQ(read->cores, 2);
  const auto unknown = records::to_line(records::Start{});
  EXPECT_EQ(unknown.find("\"machine\""), std::string::npos);
  EXPECT_EQ(unknown.find("\"cores\""), std::string::npos);
  EXPECT_FALSE(records::start_from_line(R"({"type":"start","cores":"two"})").has_value());
}

TEST(RecordReading, MalformedLinesAndMistypedFieldsAreRefused) {
  EXPECT_FALSE(records::step_from_line("not json").has_value());
  EXPECT_FALSE(records::step_from_line("[1, 2]").has_value());
  EXPECT_FALSE(records::step_from_line(R"({"type":"epoch","epoch":1})").has_value());
  EXPECT_FALSE(records::step_from_line(R"({"type":"step","step_ms":"fast"})").has_value());
  EXPECT_FALSE(records::step_from_line(R"({"type":"step","skipped":1})").has_value());
  EXPECT_TRUE(records::step_from_line(R"({"type":"step","skipped":true})").has_value());
  EXPECT_FALSE(records::end_from_line(R"({"type":"end","outcome":"exploded"})").has_value());
  // Found by fuzzing: a "type" that is not text threw from nlohmann's value().
  EXPECT_FALSE(records::step_from_line(R"({"type":0.75})").has_value());
  EXPECT_FALSE(records::end_from_line(R"({"type":["end"]})").has_value());
  EXPECT_FALSE(records::rank_rss_from_line(R"({"type":"system","rank_rss":{"x":1}})").has_value());
  EXPECT_FALSE(
      records::rank_rss_from_line(R"({"type":"system","rank_rss":{"0":"big"}})").has_value());
}

TEST(RecordReading, MissingFieldsKeepTheirDefaults) {
  const auto step = records::step_from_line(R"({"type":"step","rank":1,"step":7,"step_ms":12.5})");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->rank, 1);
  EXPECT_EQ(step->step, 7);
  EXPECT_DOUBLE_EQ(step->step_ms, 12.5);
  EXPECT_FALSE(step->loss.has_value());  // a rank that does not compute the loss
  EXPECT_EQ(step->stage, -1);
  const auto rss = records::rank_rss_from_line(R"({"type":"system","rank_rss":{"0":10,"3":30}})");
  ASSERT_TRUE(rss.has_value());
  EXPECT_EQ(rss->at(0), 10);
  EXPECT_EQ(rss->at(3), 30);
  EXPECT_TRUE(records::rank_rss_from_line(R"({"type":"system","nic_rx":5})")->empty());
}

TEST(RecordReading, LeadIsRankZeroOrReplicaZerosLossStage) {
  Step s;
  s.rank = 0;
  EXPECT_TRUE(records::is_lead(s));
  s.rank = 1;
  EXPECT_FALSE(records::is_lead(s));
  s.stage = 1;
  s.replica = 0;
  EXPECT_TRUE(records::is_lead(s));
  s.replica = 1;
  EXPECT_FALSE(records::is_lead(s));
  s.replica = 0;
  s.loss = std::nullopt;
  EXPECT_FALSE(records::is_lead(s));
}

}  // namespace
}  // namespace flotilla::metrics
