// The agent when the disk under its home fills up during a run: the spool
// cannot grow, so the run ends `failed` saying "no space left" and naming the
// spool, its ranks are stopped, every record spooled before is delivered, and
// the agent serves on. The home is a small tmpfs of the test's own (root).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <set>

#include "agent_process.h"
#include "ports.h"
#include "small_disk.h"
#include "temp_dir.h"

namespace flotilla::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

bool is_step(const json& m) {
  return m["type"] == "record" && m["record"]["type"] == "step";
}

// The seq of every line of a spool.
std::vector<int64_t> spooled_seqs(const std::filesystem::path& spool) {
  std::vector<int64_t> seqs;
  std::ifstream in(spool);
  for (std::string line; std::getline(in, line);) seqs.push_back(json::parse(line)["seq"]);
  return seqs;
}

TEST(AgentDisk, ASpoolOnAFullDiskFailsTheRunNamingItStopsTheRanksAndTheAgentServesOn) {
  if (!SmallDisk::can_mount()) GTEST_SKIP() << "mounting a small file system to fill needs root";
  TempDir dir;
  const auto home = dir.path() / "home";
  SmallDisk disk(home, "8m");
  AgentProcess agent(home);
  agent.hello();
  agent.send(start_message("run-full", 100000, free_tcp_port()));
  int steps = 0;
  auto messages = agent.until([&](const json& m) { return is_step(m) && ++steps >= 20; }, 120s);
  ASSERT_EQ(steps, 20) << "the run did not get going";
  const auto pgids = pgids_of(messages);
  ASSERT_EQ(pgids.size(), 2u);

  const auto filled_at = AgentClock::now();
  disk.fill();
  auto rest = agent.until(is_end, 120s);
  const double detected_s = std::chrono::duration<double>(AgentClock::now() - filled_at).count();
  messages.insert(messages.end(), rest.begin(), rest.end());
  ASSERT_FALSE(rest.empty());
  const auto& end = rest.back();
  ASSERT_EQ(end["type"], "run_end") << end;
  EXPECT_EQ(end["outcome"], "failed") << end;
  const auto spool = home / "runs" / "run-full" / "spool.jsonl";
  const std::string message = end["message"];
  EXPECT_NE(message.find("no space left"), std::string::npos) << message;
  EXPECT_NE(message.find(spool.string()), std::string::npos) << message;
  EXPECT_TRUE(alive_in(pgids).empty()) << "ranks of the run are left";

  // Every record the spool holds reached the controller, in order, once.
  expect_contiguous(messages, 1);
  std::vector<int64_t> delivered;
  for (const auto& m : messages)
    if (m["type"] == "record" || m["type"] == "run_end") delivered.push_back(m["seq"]);
  EXPECT_EQ(delivered, spooled_seqs(spool));

  // The agent serves on: a probe is answered, and once there is room again
  // a new run finishes.
  agent.send({{"v", 1}, {"type", "probe"}});
  const auto probe = agent.next(20s);
  ASSERT_TRUE(probe);
  EXPECT_EQ((*probe)["type"], "probe_reply") << *probe;
  disk.free();
  agent.send(start_message("run-after", 4, free_tcp_port()));
  const auto after = agent.until(is_end, 120s);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.back()["outcome"], "finished") << after.back();
  std::cout << "spool on a full disk: run ended " << detected_s << " s after the disk filled, "
            << delivered.size() << " records delivered, all of the spool\n  run_end: " << message
            << "\n";
}

}  // namespace
}  // namespace flotilla::testing
