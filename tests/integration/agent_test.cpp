// flotilla-agent as a real process on pipes, with real flotilla-train ranks.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "agent_process.h"
#include "ports.h"
#include "temp_dir.h"

namespace flotilla::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

TEST(Agent, AnswersHelloAndRefusesAnotherProtocolVersion) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.send({{"v", 99}, {"type", "hello"}, {"role", "controller"}});
  auto reply = agent.next(std::chrono::seconds(10));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "error");
  EXPECT_EQ((*reply)["message"],
            "protocol version 99 is not supported: this agent speaks version 1");
  EXPECT_EQ(agent.wait_exit(), 2);
}

TEST(Agent, ProbeDescribesTheNode) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  agent.send({{"v", 1}, {"type", "probe"}});
  auto reply = agent.next(std::chrono::seconds(20));
  ASSERT_TRUE(reply);
  ASSERT_EQ((*reply)["type"], "probe_reply") << *reply;
  EXPECT_EQ((*reply)["cpus"].get<int64_t>(), static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_GT((*reply)["memory_bytes"].get<int64_t>(), 0);
  EXPECT_GT((*reply)["disk_free_bytes"].get<int64_t>(), 0);
  EXPECT_GT((*reply)["free_port"].get<int>(), 0);
  EXPECT_FALSE((*reply)["os"].get<std::string>().empty());
  EXPECT_EQ((*reply)["kernel"].get<std::string>().rfind("Linux ", 0), 0u);
  ASSERT_TRUE((*reply)["gpus"].is_array());
  // Where a driver is present, NVML names every GPU with its memory.
  if (std::filesystem::exists("/dev/nvidiactl")) {
    ASSERT_FALSE((*reply)["gpus"].empty()) << *reply;
    for (const auto& gpu : (*reply)["gpus"]) {
      EXPECT_FALSE(gpu["name"].get<std::string>().empty());
      EXPECT_GT(gpu["memory_bytes"].get<int64_t>(), 0);
    }
  }
}

TEST(Agent, CountsAndReportsMalformedLinesAndKeepsServing) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  agent.send_raw("{\"v\":1,\"type\":\"status\",\"run\":\n");  // truncated JSON
  agent.send_raw(
      "{\"v\":1,\"type\":\"resume\",\"run\":\"a\",\"after_seq\":\"x\"}\n");  // wrong type
  agent.send_raw("{\"v\":1,\"type\":\"teleport\"}\n");                       // unknown type
  agent.send_raw(std::string(17u << 20, 'x') + "\n");                        // huge line
  std::vector<std::string> errors;
  for (int i = 0; i < 4; ++i) {
    auto m = agent.next(std::chrono::seconds(20));
    ASSERT_TRUE(m) << "reply " << i;
    ASSERT_EQ((*m)["type"], "error");
    errors.push_back((*m)["message"]);
  }
  EXPECT_EQ(errors[0].rfind("malformed line 2 (1 so far): not JSON", 0), 0u) << errors[0];
  EXPECT_EQ(errors[1],
            "malformed line 3 (2 so far): field \"after_seq\" has the wrong type: \"x\"");
  EXPECT_EQ(errors[2], "malformed line 4 (3 so far): unknown message type \"teleport\"");
  EXPECT_EQ(errors[3],
            "malformed line 5 (4 so far): line of 17825792 bytes is longer than the "
            "16777216 allowed");
  agent.send({{"v", 1}, {"type", "status"}, {"run", "nope"}});
  auto still = agent.next(std::chrono::seconds(10));
  ASSERT_TRUE(still);
  EXPECT_EQ((*still)["message"], "status: no run \"nope\" on this node");
}

TEST(Agent, TwoRankRunStreamsEveryRecordInOrderAndFinishes) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  agent.send(start_message("run-ok", 4, free_tcp_port()));
  auto messages = agent.until(is_end, std::chrono::seconds(120));
  ASSERT_FALSE(messages.empty());
  ASSERT_EQ(messages.back()["type"], "run_end") << messages.back();
  EXPECT_EQ(messages.back()["outcome"], "finished") << messages.back();
  expect_contiguous(messages, 1);
  std::map<int, int> steps_per_rank;
  for (const auto& m : messages)
    if (m["type"] == "record" && m["record"]["type"] == "step") {
      ++steps_per_rank[m["rank"].get<int>()];
      EXPECT_EQ(m["record"]["bytes_sent"], 4 * 421642) << "one all-reduce of every gradient";
    }
  EXPECT_EQ(steps_per_rank, (std::map<int, int>{{0, 4}, {1, 4}}));
  EXPECT_TRUE(alive_in(pgids_of(messages)).empty());
}

// The permission bits of `path` as octal digits ("700").
std::string mode_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  char digits[8];
  std::snprintf(digits, sizeof digits, "%o", st.st_mode & 07777);
  return digits;
}

TEST(Agent, RunDirectoryIs0700AndItsFiles0600WhateverTheUmask) {
  TempDir home;
  // The agent and what it starts inherit the umask: 000 would leave every
  // file it creates with the mode it asks for, 0644 or 0666 included.
  const mode_t previous = ::umask(0);
  AgentProcess agent(home.path());
  ::umask(previous);
  agent.hello();
  agent.send(start_message("run-private", 2, free_tcp_port()));
  auto messages = agent.until(is_end, std::chrono::seconds(120));
  ASSERT_FALSE(messages.empty());
  ASSERT_EQ(messages.back()["outcome"], "finished") << messages.back();

  const auto runs = home.path() / "runs";
  const auto dir = runs / "run-private";
  EXPECT_EQ(mode_of(runs), "700");
  EXPECT_EQ(mode_of(dir), "700");
  for (const char* name : {"spool.jsonl", "rank-0.log", "rank-1.log", "supervisor.log",
                           "start.json", "config.json", "final.json", "pgids.json"})
    EXPECT_EQ(mode_of(dir / name), "600") << name;
  // Nothing else in there is readable by anyone but its owner.
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(mode_of(entry.path()), entry.is_directory() ? "700" : "600") << entry.path();
}

TEST(Agent, StopLeavesNoProcessOfTheRun) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  agent.send(start_message("run-kill", 100000, free_tcp_port()));
  auto first = agent.until(
      [](const json& m) { return m["type"] == "record" && m["record"]["type"] == "step"; },
      std::chrono::seconds(60));
  const auto pgids = pgids_of(first);
  ASSERT_EQ(pgids.size(), 2u);
  ASSERT_EQ(first.back()["record"]["type"], "step");
  const auto asked = Clock::now();
  agent.send({{"v", 1}, {"type", "stop"}, {"run", "run-kill"}, {"grace_s", 3}});
  auto rest = agent.until(is_end, std::chrono::seconds(10));
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back()["outcome"], "killed");
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(10));
  EXPECT_TRUE(alive_in(pgids).empty());
}

// The `Max data size` line of a process's /proc/PID/limits: "soft hard".
std::string data_limit_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max data size", 0) != 0) continue;
    std::istringstream fields(line.substr(std::string("Max data size").size()));
    std::string soft, hard;
    fields >> soft >> hard;
    return soft + " " + hard;
  }
  return "(no Max data size line)";
}

// limits.memory_mb is watched by the supervisor, not set as a resource
// limit: under RLIMIT_DATA (which the agent set before) OpenBLAS spins on its
// failed buffer mmap. A rank within its limit keeps the agent's own limits
// and trains on.
TEST(Agent, LimitsMemoryMbSetsNoDataLimitAndARankWithinItTrains) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  auto start = start_message("run-limited", 100000, free_tcp_port());
  start["config"]["limits"] = {{"memory_mb", 1024}};
  agent.send(start);
  auto first = agent.until(
      [](const json& m) {
        return m["type"] == "run_end" || (m["type"] == "record" && m["record"]["type"] == "step");
      },
      std::chrono::seconds(60));
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(first.back()["type"], "record") << first.back();
  const auto pgids = pgids_of(first);
  ASSERT_EQ(pgids.size(), 2u);
  for (int pid : pgids)
    EXPECT_EQ(data_limit_of(pid), data_limit_of(getpid())) << "rank pid " << pid;
  agent.send({{"v", 1}, {"type", "stop"}, {"run", "run-limited"}, {"grace_s", 3}});
  const auto rest = agent.until(is_end, std::chrono::seconds(10));
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back()["outcome"], "killed") << rest.back();
}

// What the run ends with when the supervisor killed a rank for its memory,
// and the rank's end record it wrote in the rank's stead.
void expect_memory_oom(const std::vector<json>& messages, int64_t limit_mb, int64_t batch_size) {
  ASSERT_FALSE(messages.empty());
  const auto& end = messages.back();
  ASSERT_EQ(end["type"], "run_end") << end;
  EXPECT_EQ(end["outcome"], "oom") << end;
  const auto message = end["message"].get<std::string>();
  EXPECT_NE(message.find("out of memory: "), std::string::npos) << message;
  EXPECT_NE(message.find(" MiB resident, beyond limits.memory_mb " + std::to_string(limit_mb) +
                         " (batch_size " + std::to_string(batch_size) + ")"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.rfind("rank ", 0), 0u) << message;
  const auto rank_oom = std::find_if(messages.begin(), messages.end(), [](const json& m) {
    return m["type"] == "record" && m["record"]["type"] == "end" && m["record"]["outcome"] == "oom";
  });
  ASSERT_NE(rank_oom, messages.end()) << "no rank's end record says oom";
  EXPECT_EQ((*rank_oom)["record"]["batch_size"], batch_size) << *rank_oom;
  EXPECT_NE(message.find((*rank_oom)["record"]["message"].get<std::string>()), std::string::npos)
      << *rank_oom;
}

TEST(Agent, ARankBeyondItsMemoryLimitEndsTheRunOomWithItsBatch) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  // Two ranks of the small CNN at 2048 images each hold about 1 GiB resident
  // each; 450 MiB holds LibTorch and the data set but not the activations.
  auto start = start_message("run-oom", 2, free_tcp_port());
  start["config"]["batch_size"] = 2048;
  start["config"]["synthetic"]["train_samples"] = 4096;
  start["config"]["limits"] = {{"memory_mb", 450}};
  agent.send(start);
  const auto messages = agent.until(is_end, std::chrono::seconds(120));
  expect_memory_oom(messages, 450, 2048);
  EXPECT_TRUE(alive_in(pgids_of(messages)).empty());
}

// The Transformer's matrix products go through the BLAS library (OpenBLAS
// where installed, as scripts/setup.sh installs it): a rank beyond its limit
// ends oom rather than spinning in the library, as it did under RLIMIT_DATA.
TEST(Agent, ATransformerRankBeyondItsMemoryLimitEndsOomRatherThanSpinning) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  auto start = start_message("run-oom-blas", 2, free_tcp_port());
  auto& config = start["config"];
  config["model"] = "transformer_encoder";
  config["transformer"] = {{"vocab", 1000}, {"hidden", 256}, {"layers", 2},
                           {"heads", 4},    {"ffn", 1024},   {"max_positions", 130}};
  config["synthetic"] = {{"shape", {128}},
                         {"vocab", 1000},
                         {"classes", 2},
                         {"train_samples", 512},
                         {"test_samples", 16}};
  config["batch_size"] = 256;
  config["limits"] = {{"memory_mb", 400}};
  agent.send(start);
  const auto messages = agent.until(is_end, std::chrono::seconds(120));
  expect_memory_oom(messages, 400, 256);
  EXPECT_TRUE(alive_in(pgids_of(messages)).empty());
}

// The agent and its ranks under a comma-decimal locale: a config's decimals
// reach the engine as numbers, and a fractional grace period is written and
// read back as itself.
TEST(Agent, RunsAndStopsUnderACommaDecimalLocale) {
  TempDir home;
  AgentProcess agent(home.path(), {"LC_ALL=de_DE.UTF-8", "LANG=de_DE.UTF-8"});
  agent.hello();
  auto start = start_message("run-komma", 100000, free_tcp_port());
  start["config"]["optimizer"] = {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  start["config"]["dropout"] = 0.1;
  agent.send(start);
  auto first = agent.until(
      [](const json& m) {
        return m["type"] == "run_end" || (m["type"] == "record" && m["record"]["type"] == "step");
      },
      std::chrono::seconds(60));
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(first.back()["type"], "record") << first.back();
  EXPECT_DOUBLE_EQ(first.back()["record"]["lr"].get<double>(), 0.05);
  agent.send({{"v", 1}, {"type", "stop"}, {"run", "run-komma"}, {"grace_s", 0.25}});
  auto rest = agent.until(is_end, std::chrono::seconds(20));
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back()["outcome"], "killed") << rest.back();
  std::ifstream grace(home.path() / "runs" / "run-komma" / "stop_grace_s");
  std::string text;
  std::getline(grace, text);
  EXPECT_EQ(text, "0.25");
  EXPECT_TRUE(alive_in(pgids_of(first)).empty());
}

TEST(Agent, FailingRankFailsTheRunWithItsMessageAndStopsTheOther) {
  TempDir home;
  AgentProcess agent(home.path(), {"FLOTILLA_FAULT=1:3"});
  agent.hello();
  agent.send(start_message("run-fail", 100000, free_tcp_port()));
  auto messages = agent.until(is_end, std::chrono::seconds(120));
  ASSERT_EQ(messages.back()["type"], "run_end");
  EXPECT_EQ(messages.back()["outcome"], "failed");
  EXPECT_EQ(messages.back()["message"], "rank 1: injected fault at step 3 on rank 1");
  EXPECT_TRUE(alive_in(pgids_of(messages)).empty());
}

// The agent checks the data where its ranks would read it, before it starts
// any: a missing file or a damaged one refuses the start with the file named,
// and nothing of the run is left behind on the node.
TEST(Agent, DataMissingOrDamagedOnTheNodeRefusesTheStartNamingTheFile) {
  TempDir home;
  const auto data = home.path() / "cifar";
  std::filesystem::create_directories(data);
  for (int i = 1; i <= 5; ++i)
    home.write("cifar/data_batch_" + std::to_string(i) + ".bin", std::string(2 * 3073, '\x01'));
  AgentProcess agent(home.path());
  agent.hello();
  auto start = start_message("run-nodata", 10, free_tcp_port());
  start["config"]["dataset"] = "cifar10";
  start["config"]["data_dir"] = data.string();
  agent.send(start);
  auto reply = agent.next(std::chrono::seconds(20));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "error") << *reply;
  EXPECT_EQ((*reply)["run"], "run-nodata");
  EXPECT_EQ((*reply)["message"],
            "start: the data set cannot be read on this node, no rank was started: data_dir: "
            "missing \"" +
                (data / "test_batch.bin").string() + "\" for dataset \"cifar10\"");
  EXPECT_FALSE(std::filesystem::exists(home.path() / "runs" / "run-nodata"));

  home.write("cifar/test_batch.bin", std::string(3073 + 100, '\x01'));  // cut mid-record
  start["run"] = "run-damaged";
  agent.send(start);
  reply = agent.next(std::chrono::seconds(20));
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["type"], "error") << *reply;
  EXPECT_EQ((*reply)["run"], "run-damaged");
  EXPECT_EQ((*reply)["message"],
            "start: the data set cannot be read on this node, no rank was started: data_dir: \"" +
                (data / "test_batch.bin").string() +
                "\" holds 3173 bytes, not a whole number of 3073-byte CIFAR records (dataset "
                "\"cifar10\")");
  EXPECT_FALSE(std::filesystem::exists(home.path() / "runs" / "run-damaged"));
}

TEST(Agent, MalformedRankOutputIsCountedAndReportedNotFatal) {
  TempDir home;
  // A stand-in rank that writes one record, one line of garbage, and exits cleanly.
  const auto rank = home.write(
      "fake-train.sh", "#!/bin/sh\necho '{\"type\":\"step\",\"step\":1}'\necho 'oops, not json'\n");
  std::filesystem::permissions(rank, std::filesystem::perms::owner_all);
  AgentProcess agent(home.path(), {}, rank.string());
  agent.hello();
  agent.send(start_message("run-garbage", 1, free_tcp_port()));
  auto messages = agent.until(is_end, std::chrono::seconds(30));
  ASSERT_EQ(messages.back()["type"], "run_end");
  EXPECT_EQ(messages.back()["outcome"], "finished");
  EXPECT_EQ(messages.back()["message"],
            "2 malformed record line(s) from the ranks, kept in their rank-N.log");
  int steps = 0;
  for (const auto& m : messages) steps += m["type"] == "record" && m["record"]["type"] == "step";
  EXPECT_EQ(steps, 2);  // one from each of the two ranks, garbage left out
  expect_contiguous(messages, 1);
}

// A crash the rank-line fuzzer reaches: nlohmann ends its input at a NUL, so
// a line with bytes after a NUL was spooled whole and the controller could
// not decode the spool line. Now it is a malformed line like any other.
TEST(Agent, ARankLineWithNulsAfterTheRecordIsMalformed) {
  TempDir home;
  const auto rank =
      home.write("fake-train.sh",
                 "#!/bin/sh\nprintf '{\"type\":\"step\",\"step\":1,\"time\":1}\\000\\000"
                 "{junk}\\n{\"type\":\"step\",\"step\":2}\\n'\n");
  std::filesystem::permissions(rank, std::filesystem::perms::owner_all);
  AgentProcess agent(home.path(), {}, rank.string());
  agent.hello();
  agent.send(start_message("run-nul", 1, free_tcp_port()));
  auto messages = agent.until(is_end, std::chrono::seconds(30));
  ASSERT_EQ(messages.back()["type"], "run_end");
  EXPECT_EQ(messages.back()["outcome"], "finished");
  EXPECT_EQ(messages.back()["message"],
            "2 malformed record line(s) from the ranks, kept in their rank-N.log");
  std::vector<int64_t> steps;
  for (const auto& m : messages)
    if (m["type"] == "record" && m["record"]["type"] == "step")
      steps.push_back(m["record"]["step"]);
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 2}));  // each rank's good line, the other left out
  expect_contiguous(messages, 1);
}

// A crash the rank-line fuzzer reaches: the supervisor read a failed rank's
// end record with nlohmann's value(), which throws when `outcome` is not
// text, and the run ended with the exception's words. Now the end record is
// malformed and the rank's failure is told from its stderr.
TEST(Agent, AnEndRecordWhoseOutcomeIsNotTextFailsTheRunWithTheRanksOwnWords) {
  TempDir home;
  const auto rank =
      home.write("fake-train.sh",
                 "#!/bin/sh\necho '{\"type\":\"end\",\"outcome\":5,\"message\":[1]}'\n"
                 "echo 'rank gave up' >&2\nexit 3\n");
  std::filesystem::permissions(rank, std::filesystem::perms::owner_all);
  AgentProcess agent(home.path(), {}, rank.string());
  agent.hello();
  agent.send(start_message("run-bad-end", 1, free_tcp_port()));
  auto messages = agent.until(is_end, std::chrono::seconds(30));
  ASSERT_EQ(messages.back()["type"], "run_end");
  EXPECT_EQ(messages.back()["outcome"], "failed");
  const auto message = messages.back()["message"].get<std::string>();
  EXPECT_EQ(message.rfind("rank ", 0), 0u) << message;
  EXPECT_NE(message.find("rank gave up"), std::string::npos) << message;
  EXPECT_NE(message.find("malformed record line(s)"), std::string::npos) << message;
}

// The stall watchdog: a real rank frozen with SIGSTOP writes no record, its
// DDP peer waits in its all-reduce and writes none either; after
// stall_timeout_s the run ends failed naming the frozen rank and its last
// step, and no process of it is left.
TEST(Agent, ARankThatStallsEndsTheRunFailedNamingItAndItsLastStep) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  auto start = start_message("run-stall", 100000, free_tcp_port());
  start["config"]["stall_timeout_s"] = 5;
  agent.send(start);
  auto first = agent.until(
      [](const json& m) {
        return m["type"] == "record" && m["rank"] == 1 && m["record"]["type"] == "step";
      },
      std::chrono::seconds(60));
  const auto pgids = pgids_of(first);
  ASSERT_EQ(pgids.size(), 2u);
  ASSERT_EQ(first.back()["type"], "record") << "rank 1 wrote no step";
  ASSERT_EQ(kill(pgids[1], SIGSTOP), 0);
  auto rest = agent.until(is_end, std::chrono::seconds(60));
  ASSERT_FALSE(rest.empty());
  ASSERT_EQ(rest.back()["type"], "run_end") << rest.back();
  EXPECT_EQ(rest.back()["outcome"], "failed") << rest.back();
  // Rank 1's last step is the last one it wrote before it froze.
  int64_t last_step = -1;
  for (const auto& messages : {first, rest})
    for (const auto& m : messages)
      if (m["type"] == "record" && m["rank"] == 1 && m["record"]["type"] == "step")
        last_step = m["record"]["step"];
  const auto message = rest.back()["message"].get<std::string>();
  EXPECT_EQ(message.rfind("stalled: no record for 5 s from ", 0), 0u) << message;
  EXPECT_NE(message.find("rank 1 (last step " + std::to_string(last_step) + ")"), std::string::npos)
      << message;
  EXPECT_TRUE(alive_in(pgids).empty());
}

// Loading data and meeting the peers comes before a rank's first record and
// has its own limit: a rank slower to start than stall_timeout_s is not
// stalled (the stand-in takes 3 s to start against a 1 s watchdog).
TEST(Agent, ARankSlowerToStartThanTheStallTimeoutIsNotStalled) {
  TempDir home;
  const auto rank =
      home.write("fake-train.sh", "#!/bin/sh\nsleep 3\necho '{\"type\":\"step\",\"step\":1}'\n");
  std::filesystem::permissions(rank, std::filesystem::perms::owner_all);
  AgentProcess agent(home.path(), {}, rank.string());
  agent.hello();
  auto start = start_message("run-slow-start", 1, free_tcp_port());
  start["config"]["stall_timeout_s"] = 1;
  agent.send(start);
  auto messages = agent.until(is_end, std::chrono::seconds(30));
  ASSERT_EQ(messages.back()["type"], "run_end");
  EXPECT_EQ(messages.back()["outcome"], "finished") << messages.back();
}

TEST(Agent, ASecondStreamOfARunReplacesTheFirstWithoutBlocking) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  agent.send(start_message("run-twice", 100000, free_tcp_port()));
  auto first =
      agent.until([](const json& m) { return m["type"] == "record"; }, std::chrono::seconds(60));
  const auto pgids = pgids_of(first);
  agent.send({{"v", 1}, {"type", "resume"}, {"run", "run-twice"}, {"after_seq", 0}});
  agent.send({{"v", 1}, {"type", "status"}, {"run", "run-twice"}});
  auto replies = agent.until([](const json& m) { return m["type"] == "status_reply"; },
                             std::chrono::seconds(10));
  ASSERT_FALSE(replies.empty());
  ASSERT_EQ(replies.back()["type"], "status_reply") << "the session kept serving";
  EXPECT_EQ(replies.back()["state"], "running");
  agent.send({{"v", 1}, {"type", "stop"}, {"run", "run-twice"}, {"grace_s", 2}});
  auto rest = agent.until(is_end, std::chrono::seconds(15));
  ASSERT_FALSE(rest.empty());
  ASSERT_EQ(rest.back()["type"], "run_end");
  EXPECT_EQ(rest.back()["outcome"], "killed");
  EXPECT_TRUE(alive_in(pgids).empty());
}

// Kills the supervisor of a fresh run, then sends a stop with `why` (empty:
// on request); returns the run_end and whether any rank survived.
std::pair<json, bool> stop_after_killing_the_supervisor(const std::string& why) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  agent.send(start_message("run-orphan", 100000, free_tcp_port()));
  auto first =
      agent.until([](const json& m) { return m["type"] == "record"; }, std::chrono::seconds(60));
  const auto pgids = pgids_of(first);
  EXPECT_EQ(pgids.size(), 2u);
  const int supervisor = supervisor_pid_in(home.path() / "runs" / "run-orphan");
  if (supervisor <= 1 || kill(supervisor, SIGKILL) != 0) return {json{}, true};
  // Gone once /proc says so: PID 1 here may be slow to reap it, or never do.
  while (running(supervisor)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  json stop{{"v", 1}, {"type", "stop"}, {"run", "run-orphan"}};
  if (!why.empty()) stop["why"] = why;
  agent.send(stop);
  auto rest = agent.until(is_end, std::chrono::seconds(40));
  return {rest.back(), !alive_in(pgids).empty()};
}

TEST(Agent, StopOfARunWhoseSupervisorDiedEndsItAnyway) {
  const auto [end, survivors] = stop_after_killing_the_supervisor("");
  ASSERT_EQ(end["type"], "run_end");
  // Within the follower's one-second check the death may be seen first.
  if (end["outcome"] == "killed")
    EXPECT_EQ(end["message"], "the run's supervisor had died; no process of the run is left");
  else
    EXPECT_EQ(end["message"],
              "the run's supervisor died without ending it; its ranks were stopped");
  EXPECT_FALSE(survivors);
}

// The stop a controller sends after another node failed can come before this
// node's follower sees its dead supervisor: the death is still this node's
// failure, and its words reach the run's reason.
TEST(Agent, StopAfterAFailureElsewhereReportsADeadSupervisorAsAFailure) {
  const auto [end, survivors] = stop_after_killing_the_supervisor("node flh1");
  ASSERT_EQ(end["type"], "run_end");
  EXPECT_EQ(end["outcome"], "failed");
  EXPECT_EQ(end["message"], "the run's supervisor died without ending it; its ranks were stopped");
  EXPECT_FALSE(survivors);
}

TEST(Agent, RunOutlivesItsSessionAndResumesFromAnySeq) {
  TempDir home;
  std::vector<json> before;
  {
    AgentProcess agent(home.path());
    agent.hello();
    agent.send(start_message("run-resume", 12, free_tcp_port()));
    before = agent.until([](const json& m) { return m["type"] == "record" && m["seq"] >= 3; },
                         std::chrono::seconds(60));
    ASSERT_GE(before.back()["seq"], 3);
  }  // the session and its agent process end here
  const int64_t last = before.back()["seq"];
  AgentProcess again(home.path());
  again.hello();
  again.send({{"v", 1}, {"type", "resume"}, {"run", "run-resume"}, {"after_seq", last}});
  auto after = again.until(is_end, std::chrono::seconds(120));
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.back()["outcome"], "finished");
  EXPECT_EQ(after.front()["seq"], last + 1) << "exactly the missing ones";
  expect_contiguous(after, last + 1);
}

// A second controller (`flotilla kill` beside `flotilla run`) resumes from
// what the first one stored, which may already hold the node's run_end: it
// must still hear that the run is over on this node, or it waits in vain.
TEST(Agent, AResumeAfterTheStoredEndStillSendsTheEnd) {
  TempDir home;
  AgentProcess agent(home.path());
  agent.hello();
  agent.send(start_message("run-ended", 3, free_tcp_port()));
  const auto first = agent.until(is_end, std::chrono::seconds(120));
  ASSERT_FALSE(first.empty());
  ASSERT_TRUE(is_end(first.back()));
  const int64_t end_seq = first.back()["seq"];
  AgentProcess again(home.path());
  again.hello();
  again.send({{"v", 1}, {"type", "resume"}, {"run", "run-ended"}, {"after_seq", end_seq}});
  const auto after = again.until(is_end, std::chrono::seconds(20));
  ASSERT_EQ(after.size(), 1u) << "only the end, which the controller already stored";
  EXPECT_TRUE(is_end(after.front()));
  EXPECT_EQ(after.front()["seq"], end_seq);
  EXPECT_EQ(after.front()["outcome"], "finished");
}

}  // namespace
}  // namespace flotilla::testing
