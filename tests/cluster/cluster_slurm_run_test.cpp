// Runs on a real SLURM cluster (cluster.sh --slurm) through the `flotilla`
// CLI, as a user of an HPC centre would: the login node added and probed,
// a run submitted as one job whose srun starts a supervisor on every
// allocated node, queued behind another job, killed with scancel, and
// ended by SLURM itself (scancel from outside, a lost node, a time limit).
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cluster_control.h"
#include "flotilla/controller/store.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

using namespace std::chrono_literals;
using controller::RunState;
using nlohmann::json;

#define SKIP_WITHOUT_SLURM_CLUSTER()                                            \
  do {                                                                          \
    std::string why;                                                            \
    if (!TestCluster::available(&why, ClusterKind::slurm)) GTEST_SKIP() << why; \
  } while (false)

// The login node added and probed through the CLI, as docs/slurm.md says.
void add_login_node(const TestCluster& cluster, const ClusterControl& control) {
  const auto& login = cluster.host("flh1");
  const auto [added, said] =
      control.flotilla({"nodes", "add", "hpc", "--slurm", "--host", login.address, "--user",
                        login.user, "--key", cluster.key_file().string(), "--remote-dir",
                        login.remote_dir, "--partition", TestCluster::kSlurmPartition});
  ASSERT_EQ(added, 0) << said;
  const auto [probed, probe] = control.flotilla({"--trust-new-host-key", "nodes", "probe", "hpc"});
  ASSERT_EQ(probed, 0) << probe;
}

// A SLURM test cluster of `hosts` hosts with its login node added to a
// controller database and probed, as a user starts.
struct SlurmLogin {
  explicit SlurmLogin(int hosts) : cluster(hosts, ClusterKind::slurm), control(cluster, false) {
    add_login_node(cluster, control);
  }
  TestCluster cluster;
  ClusterControl control;
};

std::string slurm_experiment(const std::string& name, int nodes, int steps,
                             const std::string& slurm_extra = {}) {
  return "name: " + name +
         "\nmodel: small_cnn\ndataset: fashion_mnist\nstrategy: ddp\nnodes: [hpc]\n"
         "ranks_per_node: 1\nbatch_size: 32\nepochs: 100\nthreads: 1\nseed: 3\nmax_steps: " +
         std::to_string(steps) + "\nslurm: {nodes: " + std::to_string(nodes) + slurm_extra + "}\n";
}

// The one run of the store, once it exists.
std::string wait_for_run(const ClusterControl& control, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto runs = control.store().runs();
    if (!runs.empty()) return runs.front().id;
    std::this_thread::sleep_for(100ms);
  }
  return {};
}

// Until every rank of `run` has recorded at least `steps` steps.
bool wait_for_steps(const ClusterControl& control, const std::string& run, int ranks, int steps,
                    std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::map<int64_t, int> per_rank;
    for (const auto& r : control.store().records(run))
      if (r.type == "step") ++per_rank[r.rank];
    int ready = 0;
    for (const auto& [rank, n] : per_rank) ready += n >= steps ? 1 : 0;
    if (ready == ranks) return true;
    std::this_thread::sleep_for(200ms);
  }
  return false;
}

// A run of `yaml` started with `flotilla run` in the background, once each
// of its `ranks` ranks has trained `steps` steps; its id is empty (and the
// test has failed, saying why) when it did not get there.
struct TrainingRun {
  std::unique_ptr<ChildProcess> runner;
  std::string run;
};
TrainingRun start_training(const ClusterControl& control, const std::string& name,
                           const std::string& yaml, int ranks, int steps) {
  const auto file = control.write(name + ".yaml", yaml);
  TrainingRun started{control.start({"run", file.string()}, name + ".txt"), {}};
  started.run = wait_for_run(control, 60s);
  if (started.run.empty()) {
    ADD_FAILURE() << "no run stored: " << started.runner->output();
  } else if (!wait_for_steps(control, started.run, ranks, steps, 120s)) {
    ADD_FAILURE() << "not " << steps << " steps of every rank: " << started.runner->output();
    started.run.clear();
  }
  return started;
}

// The job of `run` as squeue lists it on the login node ("" once it is gone).
std::string job_in_queue(const TestCluster& cluster, const std::string& run) {
  return cluster.ssh("flh1", "squeue -h -n flotilla-" + run + " -o '%i %T %r'");
}

// Every process on every host whose command line names the run.
std::vector<std::string> processes_of(const TestCluster& cluster, const std::string& run) {
  std::vector<std::string> found;
  for (const auto& host : cluster.hosts())
    for (const auto& [pid, cmdline] : cluster.processes_on(host.name))
      if (cmdline.find(run) != std::string::npos ||
          cmdline.find("flotilla-train") != std::string::npos)
        found.push_back(host.name + ": " + std::to_string(pid) + " " + cmdline);
  return found;
}

TEST(SlurmRuns, AThreeNodeDdpJobFinishesWithEveryRanksRecordsContiguous) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(3);
  const auto& [cluster, control] = hpc;
  const auto file = control.write("three.yaml", slurm_experiment("three", 3, 40));
  const auto [status, said] = control.flotilla({"run", file.string()});
  ASSERT_EQ(status, 0) << said;
  const auto run = run_id_in(said);
  const auto store = control.store();
  const auto row = store.run(run);
  ASSERT_TRUE(row.has_value()) << said;
  EXPECT_EQ(row->state, RunState::finished) << row->reason;
  EXPECT_EQ(row->world_size, 3);
  EXPECT_NE(said.find("running: SLURM job "), std::string::npos) << said;
  EXPECT_NE(said.find(" on flh[1-3]"), std::string::npos) << said;

  // Every rank trained every step, in order, and the stream's seq has no gap.
  std::map<int64_t, std::vector<int64_t>> steps;
  std::vector<int64_t> seqs;
  for (const auto& r : store.records(run)) {
    seqs.push_back(r.seq);
    const auto body = json::parse(r.body);
    if (r.type == "step") steps[r.rank].push_back(body.at("step").get<int64_t>());
  }
  ASSERT_EQ(steps.size(), 3u);
  for (const auto& [rank, seen] : steps) {
    ASSERT_EQ(seen.size(), 40u) << "rank " << rank;
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], int64_t(i) + 1) << "rank " << rank;
  }
  for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], int64_t(i) + 1);
  EXPECT_EQ(job_in_queue(cluster, run), "");
  EXPECT_TRUE(processes_of(cluster, run).empty());
}

TEST(SlurmRuns, ARunWaitingBehindAnotherJobIsQueuedWithSlurmsReasonAndKilledWhileItWaits) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(2);
  const auto& [cluster, control] = hpc;
  // Another user's job holds every node.
  const std::string blocker =
      cluster.ssh("flh1", "sbatch --parsable --nodes=2 --exclusive --wrap 'sleep 600'");
  const auto file = control.write("waits.yaml", slurm_experiment("waits", 2, 20));
  auto runner = control.start({"run", file.string()}, "waits.txt");
  const auto run = wait_for_run(control, 60s);
  ASSERT_FALSE(run.empty()) << runner->output();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline &&
         control.store().run(run)->state != RunState::queued)
    std::this_thread::sleep_for(100ms);
  const auto queued = control.store().run(run);
  ASSERT_EQ(queued->state, RunState::queued) << queued->reason << "\n" << runner->output();
  EXPECT_NE(queued->reason.find("SLURM job "), std::string::npos) << queued->reason;
  // SLURM's own word for a job behind another: Priority until its
  // scheduler has looked at it, then Resources.
  EXPECT_TRUE(queued->reason.find(" waits: Resources") != std::string::npos ||
              queued->reason.find(" waits: Priority") != std::string::npos)
      << queued->reason;
  const auto [listed, list] = control.flotilla({"runs"});
  ASSERT_EQ(listed, 0) << list;
  EXPECT_NE(list.find("queued"), std::string::npos) << list;
  EXPECT_NE(list.find(" waits: "), std::string::npos) << list;  // SLURM's reason, in REASON

  const auto [killed, kill_said] = control.flotilla({"kill", run});
  ASSERT_EQ(killed, 0) << kill_said;
  ASSERT_TRUE(runner->wait(60s));
  const auto ended = control.store().run(run);
  EXPECT_EQ(ended->state, RunState::killed) << ended->reason;
  EXPECT_EQ(job_in_queue(cluster, run), "");
  EXPECT_TRUE(processes_of(cluster, run).empty());
  cluster.ssh("flh1", "scancel " + blocker);
}

TEST(SlurmRuns, KillCancelsTheJobAndLeavesNoProcessOfTheRunOnAnyNode) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(3);
  const auto& [cluster, control] = hpc;
  auto [runner, run] = start_training(control, "long", slurm_experiment("long", 3, 100000), 3, 5);
  ASSERT_FALSE(run.empty());
  ASSERT_NE(job_in_queue(cluster, run), "");

  // When squeue stops listing the job, seen from the login node meanwhile.
  std::atomic<bool> killing{true};
  std::optional<std::chrono::steady_clock::time_point> gone;
  std::thread watcher([&] {
    while (killing && !gone) {
      if (job_in_queue(cluster, run).empty()) gone = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(100ms);
    }
  });
  const auto [killed, kill_said] = control.flotilla({"kill", run, "--grace", "2"});
  const auto returned = std::chrono::steady_clock::now();
  killing = false;
  watcher.join();
  ASSERT_EQ(killed, 0) << kill_said;
  ASSERT_TRUE(gone.has_value()) << "squeue still lists the job after the kill returned";
  EXPECT_LE(returned - *gone, 5s);
  ASSERT_TRUE(runner->wait(60s));
  const auto ended = control.store().run(run);
  EXPECT_EQ(ended->state, RunState::killed) << ended->reason;
  EXPECT_NE(ended->reason.find("stopped on request"), std::string::npos) << ended->reason;
  EXPECT_TRUE(processes_of(cluster, run).empty());
}

TEST(SlurmRuns, AJobCancelledOutsideFlotillaEndsTheRunKilledSayingSo) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(2);
  const auto& [cluster, control] = hpc;
  auto [runner, run] =
      start_training(control, "outside", slurm_experiment("outside", 2, 100000), 2, 3);
  ASSERT_FALSE(run.empty());
  cluster.ssh("flh1", "scancel -n flotilla-" + run);
  ASSERT_TRUE(runner->wait(90s)) << runner->output();
  const auto ended = control.store().run(run);
  EXPECT_EQ(ended->state, RunState::killed) << ended->reason;
  EXPECT_NE(ended->reason.find("was cancelled outside Flotilla (scancel)"), std::string::npos)
      << ended->reason;
  EXPECT_TRUE(processes_of(cluster, run).empty());
}

TEST(SlurmRuns, ANodeLostMidRunFailsTheRunNamingIt) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(3);
  const auto& [cluster, control] = hpc;
  auto [runner, run] = start_training(control, "lost", slurm_experiment("lost", 3, 100000), 3, 3);
  ASSERT_FALSE(run.empty());
  cluster.slurmd("flh3", /*running=*/false);
  ASSERT_TRUE(runner->wait(180s)) << runner->output();
  const auto ended = control.store().run(run);
  EXPECT_EQ(ended->state, RunState::failed) << ended->reason;
  EXPECT_NE(ended->reason.find("node flh3 of SLURM job "), std::string::npos) << ended->reason;
  EXPECT_NE(ended->reason.find("was lost (SLURM: NODE_FAIL"), std::string::npos) << ended->reason;
}

TEST(SlurmRuns, ATimeLimitEndsTheRunFailedWithSlurmsReason) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(2);
  const auto& [cluster, control] = hpc;
  // One minute, SLURM's smallest: the job outlives it.
  const auto file =
      control.write("limit.yaml", slurm_experiment("limit", 2, 100000, ", time: \"1\""));
  const auto [status, said] = control.flotilla({"run", file.string()}, 300s);
  EXPECT_NE(status, 0) << said;
  const auto run = run_id_in(said);
  const auto ended = control.store().run(run);
  ASSERT_TRUE(ended.has_value()) << said;
  EXPECT_EQ(ended->state, RunState::failed) << ended->reason;
  EXPECT_NE(ended->reason.find("reached its time limit of 00:01:00 and SLURM ended it"),
            std::string::npos)
      << ended->reason;
  EXPECT_TRUE(processes_of(cluster, run).empty());
}

TEST(SlurmRuns, ASweepOnTheClusterRunsEachPointAsAJobOfItsOwn) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(2);
  const auto& [cluster, control] = hpc;
  const auto file = control.write(
      "sweep.yaml",
      "name: on-slurm\nbase:\n  model: small_cnn\n  dataset: fashion_mnist\n  strategy: ddp\n"
      "  nodes: [hpc]\n  slurm: {nodes: 2}\n  threads: 1\n  max_steps: 10\n"
      "axes:\n  batch_size: [16, 32]\n");
  const auto [status, said] = control.flotilla({"sweep", file.string(), "--yes"});
  ASSERT_EQ(status, 0) << said;
  const auto store = control.store();
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 2u) << said;
  std::set<std::string> jobs;
  for (const auto& run : runs) {
    EXPECT_EQ(run.state, RunState::finished) << run.id << ": " << run.reason;
    for (const auto& r : store.records(run.id))
      if (r.type == "slurm_job") jobs.insert(json::parse(r.body).at("job").get<std::string>());
  }
  EXPECT_EQ(jobs.size(), 2u);  // one job a point, one after the other
  EXPECT_EQ(job_in_queue(cluster, runs.front().id), "");
}

// A run that saves checkpoints is submitted --requeue: a node lost mid-run
// makes SLURM requeue the job, and its parts, on the nodes left, go on from
// the newest checkpoint every rank holds, to the run's end.
TEST(SlurmRuns, ANodeLostMidRunIsRequeuedAndTheRunGoesOnFromItsNewestCheckpoint) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(3);
  const auto& [cluster, control] = hpc;
  auto [runner, run] = start_training(
      control, "requeue",
      slurm_experiment("requeue", 2, 1500) + "save: {every_steps: 100, keep: 2}\n", 2, 150);
  ASSERT_FALSE(run.empty());
  // The job's second node (flh1 is the login node and slurmctld's) is lost.
  const std::string nodes = cluster.ssh("flh1", "squeue -h -n flotilla-" + run + " -o %N");
  const std::string second = cluster.ssh(
      "flh1", "scontrol show hostnames '" + nodes.substr(0, nodes.find('\n')) + "' | sed -n 2p");
  const std::string lost = second.substr(0, second.find('\n'));
  ASSERT_FALSE(lost.empty()) << nodes;
  cluster.slurmd(lost, /*running=*/false);
  ASSERT_TRUE(runner->wait(300s)) << runner->output();
  const auto store = control.store();
  const auto ended = store.run(run);
  EXPECT_EQ(ended->state, RunState::finished) << ended->reason << "\n" << runner->output();
  bool requeued = false;
  for (const auto& t : store.transitions(run))
    requeued = requeued || t.reason.find(" requeued after node " + lost +
                                         " was lost (restart 1)") != std::string::npos;
  EXPECT_TRUE(requeued) << runner->output();
  // Every step of both ranks is there; the second run of the job began at
  // a checkpoint both ranks held.
  std::map<int64_t, std::set<int64_t>> steps;
  std::map<int64_t, int64_t> resumed_from;
  for (const auto& r : store.records(run)) {
    const auto body = json::parse(r.body);
    if (r.type == "step") steps[r.rank].insert(body.at("step").get<int64_t>());
    if (r.type == "start" && body.contains("resumed_from_step"))
      resumed_from[r.rank] = body["resumed_from_step"].get<int64_t>();
  }
  ASSERT_EQ(steps.size(), 2u);
  for (const auto& [rank, seen] : steps) {
    EXPECT_EQ(seen.size(), 1500u) << "rank " << rank;
    EXPECT_EQ(*seen.begin(), 1);
    EXPECT_EQ(*seen.rbegin(), 1500);
  }
  ASSERT_EQ(resumed_from.size(), 2u) << runner->output();
  EXPECT_EQ(resumed_from[0], resumed_from[1]);
  EXPECT_GE(resumed_from[0], 100);
  EXPECT_EQ(resumed_from[0] % 100, 0);
  std::cout << "node " << lost << " lost; the requeued job went on from step " << resumed_from[0]
            << std::endl;
}

// `flotilla resume` of a killed SLURM run: a new job, its ranks going on
// from the newest checkpoint in the run's folder.
TEST(SlurmRuns, AKilledRunResumesAsANewJobFromItsNewestCheckpoint) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(2);
  const auto& [cluster, control] = hpc;
  auto [runner, run] = start_training(
      control, "again", slurm_experiment("again", 2, 400) + "save: {every_steps: 50, keep: 2}\n", 2,
      120);
  ASSERT_FALSE(run.empty());
  const auto [killed, kill_said] = control.flotilla({"kill", run});
  ASSERT_EQ(killed, 0) << kill_said;
  ASSERT_TRUE(runner->wait(60s));
  ASSERT_EQ(control.store().run(run)->state, RunState::killed);

  const auto [resumed, resume_said] = control.flotilla({"resume", run});
  ASSERT_EQ(resumed, 0) << resume_said;
  const auto store = control.store();
  EXPECT_EQ(store.run(run)->state, RunState::finished) << store.run(run)->reason;
  std::map<int64_t, std::set<int64_t>> steps;
  std::map<int64_t, int64_t> resumed_from;
  std::set<std::string> jobs;
  for (const auto& r : store.records(run)) {
    const auto body = json::parse(r.body);
    if (r.type == "step") steps[r.rank].insert(body.at("step").get<int64_t>());
    if (r.type == "start" && body.contains("resumed_from_step"))
      resumed_from[r.rank] = body["resumed_from_step"].get<int64_t>();
    if (r.type == "slurm_job") jobs.insert(body.at("job").get<std::string>());
  }
  EXPECT_EQ(jobs.size(), 2u);  // the first job and the resumed one
  ASSERT_EQ(resumed_from.size(), 2u) << resume_said;
  EXPECT_EQ(resumed_from[0], resumed_from[1]);
  EXPECT_GE(resumed_from[0], 100);
  for (const auto& [rank, seen] : steps) EXPECT_EQ(seen.size(), 400u) << "rank " << rank;
}

// The controller dying mid-run leaves the job to SLURM and the login's job
// supervisor: `flotilla attach` follows it again from the last record stored.
TEST(SlurmRuns, AControllerThatDiesLeavesTheJobRunningAndAttachFollowsItToItsEnd) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  SlurmLogin hpc(2);
  const auto& [cluster, control] = hpc;
  auto [runner, run] = start_training(control, "attach", slurm_experiment("attach", 2, 400), 2, 50);
  ASSERT_FALSE(run.empty());
  runner->kill(SIGKILL);
  ASSERT_TRUE(runner->wait(30s));
  ASSERT_NE(job_in_queue(cluster, run), "");  // the job trains on without it

  const auto [attached, said] = control.flotilla({"attach", run});
  ASSERT_EQ(attached, 0) << said;
  const auto store = control.store();
  EXPECT_EQ(store.run(run)->state, RunState::finished) << store.run(run)->reason;
  std::map<int64_t, std::vector<int64_t>> steps;
  std::vector<int64_t> seqs;
  for (const auto& r : store.records(run)) {
    seqs.push_back(r.seq);
    if (r.type == "step") steps[r.rank].push_back(json::parse(r.body).at("step").get<int64_t>());
  }
  for (const auto& [rank, seen] : steps) {
    ASSERT_EQ(seen.size(), 400u) << "rank " << rank;
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], int64_t(i) + 1) << "rank " << rank;
  }
  for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], int64_t(i) + 1);
}

}  // namespace
}  // namespace flotilla::testing
