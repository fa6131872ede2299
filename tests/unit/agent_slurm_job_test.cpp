// What the login node's job supervisor asks of SLURM and reads from it,
// without a cluster: the sbatch line, the batch script, each part's ranks,
// scontrol's answer, and the words a run ends with when SLURM ended its job.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "slurm_job.h"

namespace flotilla::agent {
namespace {

TEST(SlurmJob, SbatchAsksForTheNodesOneTaskEachAndWhatTheRunSays) {
  ExperimentConfig config;
  config.slurm.nodes = 3;
  config.slurm.gpus_per_node = 4;
  config.slurm.time = "01:30:00";
  config.slurm.partition = "gpu";
  config.slurm.account = "proj42";
  config.slurm.extra = {"--qos=high", "--constraint=a100 80gb"};
  const auto args = sbatch_arguments(config, "r1", "/home/u/.flotilla/runs/r1");
  const std::vector<std::string> expected = {
      "--parsable", "--job-name=flotilla-r1", "--nodes=3", "--ntasks-per-node=1",
      // No checkpoints: a requeued job would train again from step 0.
      "--no-requeue", "--open-mode=append", "--chdir=/home/u/.flotilla/runs/r1",
      "--output=/home/u/.flotilla/runs/r1/slurm-%j.out", "--gres=gpu:4", "--time=01:30:00",
      "--partition=gpu", "--account=proj42", "--qos=high",
      // One argument, space and all: no shell between.
      "--constraint=a100 80gb"};
  EXPECT_EQ(args, expected);
  ExperimentConfig bare;
  bare.slurm.nodes = 2;
  EXPECT_EQ(sbatch_arguments(bare, "r2", "/r").size(), 8u);  // SLURM's and the site's defaults
  // A run that saves checkpoints is requeued by SLURM and goes on from them.
  bare.save.every_steps = 100;
  EXPECT_EQ(sbatch_arguments(bare, "r2", "/r")[4], "--requeue");
}

TEST(SlurmJob, TheBatchScriptStartsOneSupervisorPerNodeWithItsPathsQuoted) {
  const auto script =
      slurm_batch_script("/opt/it's/flotilla-agent", "/runs/r1/parts", "/opt/flotilla-train");
  EXPECT_EQ(script.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(script.find("exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 "
                        "'/opt/it'\\''s/flotilla-agent' supervise --slurm-part --home "
                        "'/runs/r1/parts' --train-binary '/opt/flotilla-train'\n"),
            std::string::npos)
      << script;
}

TEST(SlurmJob, EachPartRunsItsNodesRanksAndFindsItsRendezvousItself) {
  protocol::StartRun run;
  run.run = "r1";
  run.node = "hpc";
  run.ranks = {0, 1, 2, 3, 4, 5};
  run.world_size = 6;
  const auto part = slurm_part_start(run, 3, 2);
  EXPECT_EQ(part.ranks, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(part.world_size, 6);
  EXPECT_EQ(part.node, "hpc");
  EXPECT_EQ(part.master_addr, "");
  EXPECT_EQ(part.master_port, 0);
  EXPECT_EQ(slurm_part_run(2), "node-2");
  EXPECT_EQ(slurm_parts_home("/runs/r1"), "/runs/r1/parts");
  EXPECT_EQ(slurm_part_start_file("/runs/r1/parts", 2), "/runs/r1/parts/start-node-2.json");
  EXPECT_EQ(slurm_attempt_home("/runs/r1/parts", "12", 1), "/runs/r1/parts/job-12-1");
  // Every part computes the same port from the job id, within 20000..39999.
  EXPECT_EQ(slurm_master_port("1234"), slurm_master_port("1234"));
  EXPECT_NE(slurm_master_port("1234"), slurm_master_port("1235"));
  EXPECT_NE(slurm_master_port("1234", 1),
            slurm_master_port("1234"));  // requeued: a port of its own
  for (const char* id : {"1", "19999", "20000", "4294967295"}) {
    EXPECT_GE(slurm_master_port(id), 20000) << id;
    EXPECT_LT(slurm_master_port(id), 40000) << id;
  }
}

TEST(SlurmJob, APartKeepsCheckpointsInTheRunsFolderWhereARequeuedJobFindsThem) {
  EXPECT_EQ(nlohmann::json::parse(
                with_run_folder_checkpoints(R"({"save":{"every_steps":100,"dir":"ckpt"},"seed":3})",
                                            "/runs/r1"))
                .at("save")
                .at("dir"),
            "/runs/r1/ckpt");
  EXPECT_EQ(nlohmann::json::parse(
                with_run_folder_checkpoints(R"({"save":{"every_steps":100}})", "/runs/r1"))
                .at("save")
                .at("dir"),
            "/runs/r1/checkpoints");
  const std::string absolute = R"({"save":{"every_steps":100,"dir":"/scratch/c"}})";
  EXPECT_EQ(with_run_folder_checkpoints(absolute, "/runs/r1"), absolute);
  EXPECT_EQ(with_run_folder_checkpoints(R"({"seed":3})", "/runs/r1"), R"({"seed":3})");
}

TEST(SlurmJob, ReadsScontrolsOneLineJob) {
  const auto job = parse_scontrol_job(
      "JobId=12 JobName=flotilla-r1 UserId=u(1000) JobState=PENDING Reason=Resources "
      "Dependency=(null) TimeLimit=00:01:00 NodeList=(null) Command=/runs/r1/job.sh "
      "WorkDir=/runs/my run");
  EXPECT_EQ(job.at("JobId"), "12");
  EXPECT_EQ(job.at("JobState"), "PENDING");
  EXPECT_EQ(job.at("Reason"), "Resources");
  EXPECT_EQ(job.at("TimeLimit"), "00:01:00");
  EXPECT_EQ(job.at("NodeList"), "(null)");
  EXPECT_EQ(job.at("WorkDir"), "/runs/my run");
  EXPECT_TRUE(parse_scontrol_job("").empty());
}

TEST(SlurmJob, KnowsWhichStatesHaveEndedTheJob) {
  for (const char* state : {"COMPLETED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "FAILED",
                            "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
    EXPECT_TRUE(slurm_job_ended(state)) << state;
  for (const char* state : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", ""})
    EXPECT_FALSE(slurm_job_ended(state)) << state;
}

TEST(SlurmJob, SaysHowSlurmEndedTheJobOrLeavesItToTheParts) {
  const auto cancelled =
      slurm_job_outcome("12", {{"JobState", "CANCELLED"}, {"Reason", "None"}}, {});
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(cancelled->outcome, "killed");
  EXPECT_EQ(cancelled->message, "SLURM job 12 was cancelled outside Flotilla (scancel)");
  const auto timeout =
      slurm_job_outcome("12", {{"JobState", "TIMEOUT"}, {"TimeLimit", "00:01:00"}}, {});
  ASSERT_TRUE(timeout);
  EXPECT_EQ(timeout->outcome, "failed");
  EXPECT_EQ(timeout->message, "SLURM job 12 reached its time limit of 00:01:00 and SLURM ended it");
  const auto lost =
      slurm_job_outcome("12", {{"JobState", "NODE_FAIL"}, {"Reason", "NodeDown"}}, {"flh3"});
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->outcome, "failed");
  EXPECT_EQ(lost->message, "node flh3 of SLURM job 12 was lost (SLURM: NODE_FAIL, NodeDown)");
  const auto two_lost = slurm_job_outcome("12", {{"JobState", "NODE_FAIL"}}, {"a", "b"});
  EXPECT_EQ(two_lost->message, "nodes a, b of SLURM job 12 were lost (SLURM: NODE_FAIL)");
  EXPECT_EQ(slurm_job_outcome("12", {{"JobState", "OUT_OF_MEMORY"}}, {})->outcome, "oom");
  EXPECT_FALSE(slurm_job_outcome("12", {{"JobState", "COMPLETED"}}, {}));
  EXPECT_FALSE(slurm_job_outcome("12", {{"JobState", "FAILED"}}, {}));
}

}  // namespace
}  // namespace flotilla::agent
