// sinfo's answers, as a login node gives them, read into the probe's
// picture of the cluster. The real sinfo is used in tests/cluster.
#include <gtest/gtest.h>

#include <cstdlib>

#include "slurm_probe.h"

namespace flotilla::agent {
namespace {

TEST(SlurmProbe, ReadsTheVersionFromSinfo) {
  EXPECT_EQ(parse_sinfo_version("slurm 22.05.8\n"), "22.05.8");
  EXPECT_EQ(parse_sinfo_version("slurm-wlm 23.11.4\n"), "23.11.4");
}

TEST(SlurmProbe, CountsGpusInEveryFormOfGres) {
  EXPECT_EQ(gpus_in_gres(""), 0);
  EXPECT_EQ(gpus_in_gres("(null)"), 0);
  EXPECT_EQ(gpus_in_gres("gpu:4"), 4);
  EXPECT_EQ(gpus_in_gres("gpu:a100:8(S:0-1)"), 8);
  EXPECT_EQ(gpus_in_gres("gpu:a100:2(S:0),gpu:v100:1(S:1)"), 3);
  EXPECT_EQ(gpus_in_gres("mps:100,gpu:2"), 2);
  EXPECT_EQ(gpus_in_gres("gpu:a100"), 0);  // no count: not a number of GPUs
}

TEST(SlurmProbe, GroupsNodesByPartitionAndMarksTheDefault) {
  protocol::SlurmInfo info;
  parse_sinfo_nodes(
      "g1|gpu*|idle|64|gpu:a100:4(S:0-1)\n"
      "g2|gpu*|allocated|64|gpu:a100:4(S:0-1)\n"
      "g1|long|idle|64|gpu:a100:4(S:0-1)\n"
      "c1|cpu|down*|128|(null)\n",
      info);
  parse_sinfo_partitions("gpu|up|1-00:00:00\nlong|up|7-00:00:00\ncpu|down|infinite\n", info);
  ASSERT_EQ(info.partitions.size(), 3u);
  EXPECT_EQ(info.partitions[0].name, "gpu");
  EXPECT_TRUE(info.partitions[0].is_default);
  EXPECT_EQ(info.partitions[0].nodes, (std::vector<std::string>{"g1", "g2"}));
  EXPECT_EQ(info.partitions[0].time_limit, "1-00:00:00");
  EXPECT_FALSE(info.partitions[1].is_default);
  EXPECT_FALSE(info.partitions[2].up);
  ASSERT_EQ(info.nodes.size(), 3u);
  // g1 is in two partitions, listed once as a node and in both partitions' lists.
  EXPECT_EQ(info.partitions[1].nodes, (std::vector<std::string>{"g1"}));
  EXPECT_EQ(info.nodes[0].gpus, 4);
  EXPECT_EQ(info.nodes[2].state, "down*");
  EXPECT_EQ(info.nodes[2].gres, "");
  EXPECT_EQ(info.nodes[2].cpus, 128);
}

TEST(SlurmProbe, SkipsLinesThatAreNotSinfosFormat) {
  protocol::SlurmInfo info;
  parse_sinfo_nodes("slurm_load_partitions: Unable to contact slurm controller\n|x|y|z|w\n", info);
  EXPECT_TRUE(info.nodes.empty());
  EXPECT_TRUE(info.partitions.empty());
}

// A node without SLURM's client commands has no cluster to report: no
// SlurmInfo at all, rather than one holding the shell's "not found".
TEST(SlurmProbe, ANodeWhereTheShellFindsNoSinfoReportsNoCluster) {
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", "/nonexistent", 1);
  const auto info = probe_slurm();
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_FALSE(info.has_value()) << info->error;
}

}  // namespace
}  // namespace flotilla::agent
