// Flotilla and a real SLURM cluster (cluster.sh --slurm): the login node
// added and probed through the `flotilla` CLI over real SSH, as a user of
// an HPC centre would.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cluster_control.h"
#include "flotilla/controller/store.h"
#include "test_cluster.h"

namespace flotilla::testing {
namespace {

#define SKIP_WITHOUT_SLURM_CLUSTER()                                            \
  do {                                                                          \
    std::string why;                                                            \
    if (!TestCluster::available(&why, ClusterKind::slurm)) GTEST_SKIP() << why; \
  } while (false)

std::vector<std::string> add_login_node(const TestCluster& cluster, const std::string& name) {
  const auto& login = cluster.host("flh1");
  return {"nodes",        "add",
          name,           "--slurm",
          "--host",       login.address,
          "--user",       login.user,
          "--key",        cluster.key_file().string(),
          "--remote-dir", login.remote_dir,
          "--partition",  TestCluster::kSlurmPartition};
}

TEST(SlurmNodes, ALoginNodeIsAddedAndItsProbeListsThePartitionAndEveryNode) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  TestCluster cluster(3, ClusterKind::slurm);
  ClusterControl control(cluster, /*add_hosts=*/false);
  const auto [added, said] = control.flotilla(add_login_node(cluster, "hpc"));
  ASSERT_EQ(added, 0) << said;
  EXPECT_NE(said.find("added SLURM login node hpc"), std::string::npos) << said;
  EXPECT_NE(said.find("partition debug"), std::string::npos) << said;

  const auto [probed, probe] = control.flotilla({"--trust-new-host-key", "nodes", "probe", "hpc"});
  ASSERT_EQ(probed, 0) << probe;
  EXPECT_NE(probe.find("SLURM 22.05"), std::string::npos) << probe;
  EXPECT_NE(probe.find("debug* 3 nodes (3 idle, no GPU)"), std::string::npos) << probe;

  // What the probe stored: every node of the cluster, in the partition.
  const auto node = control.store().node("hpc");
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->kind, controller::NodeKind::slurm);
  EXPECT_EQ(node->slurm_partition, "debug");
  const auto stored = nlohmann::json::parse(node->probe_json);
  std::vector<std::string> names;
  for (const auto& n : stored.at("slurm").at("nodes")) names.push_back(n.at("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"flh1", "flh2", "flh3"}));
  EXPECT_EQ(stored.at("slurm").at("partitions").at(0).at("nodes").size(), 3u);

  const auto [listed, list] = control.flotilla({"nodes", "list"});
  ASSERT_EQ(listed, 0) << list;
  EXPECT_NE(list.find("slurm"), std::string::npos) << list;
  EXPECT_NE(list.find("debug* 3 nodes"), std::string::npos) << list;
}

TEST(SlurmNodes, ALoginNodeWhoseControllerIsGoneIsNotProbedAsReachable) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  TestCluster cluster(1, ClusterKind::slurm);
  ClusterControl control(cluster, /*add_hosts=*/false);
  ASSERT_EQ(control.flotilla(add_login_node(cluster, "hpc")).first, 0);
  // slurmctld gone: sinfo on the login node cannot answer.
  cluster.ssh_as_root("flh1", "pkill -9 -x slurmctld");
  const auto [probed, probe] = control.flotilla({"--trust-new-host-key", "nodes", "probe", "hpc"});
  EXPECT_NE(probed, 0) << probe;
  EXPECT_NE(probe.find("hpc: a SLURM node, but sinfo failed: "), std::string::npos) << probe;
  EXPECT_TRUE(control.store().node("hpc")->probe_json.empty());
}

TEST(SlurmNodes, ARunBiggerThanThePartitionIsRefusedSayingWhyAndNothingIsSubmitted) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  TestCluster cluster(3, ClusterKind::slurm);
  ClusterControl control(cluster, /*add_hosts=*/false);
  ASSERT_EQ(control.flotilla(add_login_node(cluster, "hpc")).first, 0);
  ASSERT_EQ(control.flotilla({"--trust-new-host-key", "nodes", "probe", "hpc"}).first, 0);
  const auto too_many =
      control.write("four.yaml",
                    "name: four\nstrategy: ddp\ndataset: synthetic\nnodes: [hpc]\n"
                    "slurm: {nodes: 4}\nmax_steps: 5\n");
  const auto [refused, said] = control.flotilla({"run", too_many.string()});
  EXPECT_NE(refused, 0) << said;
  EXPECT_NE(said.find("slurm.nodes: 4, but partition debug of hpc has 3 nodes"), std::string::npos)
      << said;
  const auto without = control.write(
      "without.yaml", "name: w\nstrategy: ddp\ndataset: synthetic\nnodes: [hpc]\nmax_steps: 5\n");
  const auto [no_slurm, no_slurm_said] = control.flotilla({"run", without.string()});
  EXPECT_NE(no_slurm, 0) << no_slurm_said;
  EXPECT_NE(no_slurm_said.find("say how many of its cluster's nodes the run takes with slurm: "
                               "{nodes: N}"),
            std::string::npos)
      << no_slurm_said;
  // Never the login node's own processes, never a job.
  for (const auto& [pid, cmdline] : cluster.processes_on("flh1"))
    EXPECT_EQ(cmdline.find("flotilla-train"), std::string::npos) << pid << " " << cmdline;
  EXPECT_EQ(cluster.ssh("flh1", "squeue -h | wc -l"), "0\n");
  EXPECT_TRUE(control.store().runs().empty());
}

TEST(SlurmNodes, PartitionAndAccountAreRefusedOnAnSshNodeAndCheckedOnASlurmOne) {
  SKIP_WITHOUT_SLURM_CLUSTER();
  TestCluster cluster(1, ClusterKind::slurm);
  ClusterControl control(cluster, /*add_hosts=*/false);
  const auto [ssh, ssh_said] =
      control.flotilla({"nodes", "add", "n1", "--host", "10.77.0.11", "--partition", "debug"});
  EXPECT_NE(ssh, 0);
  EXPECT_NE(ssh_said.find("partition: only a SLURM node (--slurm) has one, got \"debug\""),
            std::string::npos)
      << ssh_said;
  const auto [bad, bad_said] = control.flotilla(
      {"nodes", "add", "n2", "--slurm", "--host", "10.77.0.11", "--account", "a b"});
  EXPECT_NE(bad, 0);
  EXPECT_NE(bad_said.find("account: expected a SLURM account name"), std::string::npos) << bad_said;
  EXPECT_TRUE(control.store().nodes().size() <= 1u);  // only `local`, if stored at all
  EXPECT_FALSE(control.store().node("n1").has_value());
  EXPECT_FALSE(control.store().node("n2").has_value());
}

}  // namespace
}  // namespace flotilla::testing
