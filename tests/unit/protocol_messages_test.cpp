#include <gtest/gtest.h>

#include "flotilla/protocol/line_buffer.h"
#include "flotilla/protocol/messages.h"

namespace flotilla::protocol {
namespace {

TEST(Messages, EveryTypeRoundTrips) {
  const std::vector<Message> messages = {
      Hello{"controller", "flotilla 0.1", {"start", "stop"}},
      StartRun{"r1",
               "node-a",
               R"({"batch_size":8,"name":"x"})",
               {0, 1},
               4,
               "10.0.0.1",
               29511,
               RunMode::train,
               {}},
      StopRun{"r1", 2.5, ""},
      StopRun{"r1", 5, "stopped because node b failed"},
      StatusRequest{"r1"},
      Resume{"r1", 41},
      Started{"r1", {100, 101}},
      Record{"r1", 42, "node-a", 1, R"({"loss":0.5,"type":"step"})", "step"},
      RunEnd{"r1", 43, "failed", "rank 1: \"seq\":7 in a message"},
      StatusReply{"r1", "running", 43, {100}},
      Error{"something", ""},
      Error{"start: run \"r1\" already exists on this node", "r1"},
      Probe{},
      Probe{true},
      ProbeReply{"Debian GNU/Linux 12",
                 "Linux 6.1",
                 "n1",
                 16,
                 1 << 30,
                 5 << 20,
                 29555,
                 {{0, "NVIDIA H100", 80LL << 30}},
                 std::nullopt}};
  for (const auto& m : messages) {
    const auto line = encode(m);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    const auto back = decode(line);
    EXPECT_EQ(back.index(), m.index()) << line;
    EXPECT_EQ(encode(back), line);
  }
  // A record's own type is read out while decoding; an error keeps its run.
  EXPECT_EQ(std::get<Record>(decode(encode(messages[7]))).record_type, "step");
  EXPECT_EQ(std::get<Error>(decode(encode(messages[11]))).run, "r1");
  EXPECT_TRUE(std::get<Probe>(decode(encode(messages[13]))).slurm);
  const auto probe = std::get<ProbeReply>(decode(encode(messages[14])));
  EXPECT_EQ(std::get<StopRun>(decode(encode(messages[3]))).why, "stopped because node b failed");
  ASSERT_EQ(probe.gpus.size(), 1u);
  EXPECT_EQ(probe.gpus[0].name, "NVIDIA H100");
  EXPECT_EQ(probe.gpus[0].memory_bytes, 80LL << 30);
  EXPECT_EQ(probe.free_port, 29555);
}

TEST(Messages, ProbeReplyCarriesTheSlurmClusterOfALoginNodeAndNoneElsewhere) {
  ProbeReply login{"Debian GNU/Linux 12", "Linux 6.1", "login1", 8, 1 << 30, 5 << 20, 29555, {},
                   std::nullopt};
  login.slurm =
      SlurmInfo{"22.05.8",
                "",
                {{"gpu", true, true, "1-00:00:00", {"g1", "g2"}}},
                {{"g1", "idle", 64, 4, "gpu:a100:4"}, {"g2", "down*", 64, 4, "gpu:a100:4"}}};
  const auto line = encode(login);
  const auto back = std::get<ProbeReply>(decode(line));
  EXPECT_EQ(encode(back), line);
  ASSERT_TRUE(back.slurm.has_value());
  EXPECT_EQ(back.slurm->version, "22.05.8");
  ASSERT_EQ(back.slurm->partitions.size(), 1u);
  EXPECT_TRUE(back.slurm->partitions[0].is_default);
  EXPECT_EQ(back.slurm->partitions[0].nodes, (std::vector<std::string>{"g1", "g2"}));
  ASSERT_EQ(back.slurm->nodes.size(), 2u);
  EXPECT_EQ(back.slurm->nodes[1].state, "down*");
  EXPECT_EQ(back.slurm->nodes[1].gpus, 4);

  // A node without SLURM says nothing of it, and an older agent's reply reads.
  login.slurm.reset();
  EXPECT_EQ(encode(login).find("slurm"), std::string::npos);
  EXPECT_FALSE(std::get<ProbeReply>(decode(encode(login))).slurm.has_value());
}

TEST(Messages, StartRunCarriesTheBlockProfileMode) {
  StartRun profile{"p1", "flh1", "{}", {0, 1}, 2, "127.0.0.1", 29500, RunMode::block_profile, {}};
  const auto line = encode(profile);
  EXPECT_NE(line.find(R"("mode":"block_profile")"), std::string::npos) << line;
  EXPECT_EQ(std::get<StartRun>(decode(line)).mode, RunMode::block_profile);
}

TEST(Messages, StartRunCarriesTheBenchModeAndReadsOldStartsAsTraining) {
  StartRun bench{"b1",
                 "flh1",
                 "{}",
                 {0},
                 3,
                 "10.77.0.11",
                 29600,
                 RunMode::allreduce_bench,
                 BenchOptions{8, 1 << 20, 20, 0}};
  const auto line = encode(bench);
  EXPECT_NE(line.find(R"("mode":"allreduce_bench")"), std::string::npos) << line;
  EXPECT_EQ(line.find("warmup"), std::string::npos) << line;  // 0: the engine's default
  const auto back = std::get<StartRun>(decode(line));
  EXPECT_EQ(back.mode, RunMode::allreduce_bench);
  EXPECT_EQ(back.bench.min_bytes, 8);
  EXPECT_EQ(back.bench.max_bytes, 1 << 20);
  EXPECT_EQ(back.bench.iterations, 20);
  EXPECT_EQ(back.bench.warmup, 0);
  // A training start is the line it always was: no mode, no bench.
  StartRun train{"r1", "local", "{}", {0}, 1, "127.0.0.1", 29500, RunMode::train, {}};
  EXPECT_EQ(encode(train).find("mode"), std::string::npos);
  const auto old =
      decode(R"({"v":1,"type":"start","run":"r1","config":{},"ranks":[0],"world_size":1})");
  EXPECT_EQ(std::get<StartRun>(old).mode, RunMode::train);
  EXPECT_THROW(
      {
        try {
          decode(R"({"v":1,"type":"start","run":"r","config":{},"ranks":[0],"world_size":1,)"
                 R"("mode":"dance"})");
        } catch (const DecodeError& e) {
          EXPECT_STREQ(e.what(),
                       "field \"mode\": unknown run mode \"dance\" (known: train, allreduce_bench, "
                       "block_profile)");
          throw;
        }
      },
      DecodeError);
}

TEST(Messages, DecodeNamesWhatIsWrong) {
  auto error_of = [](std::string_view line) {
    try {
      decode(line);
    } catch (const DecodeError& e) {
      return std::string(e.what());
    }
    return std::string("decoded");
  };
  EXPECT_EQ(error_of(R"({"v":1,"type":"stop"})"), "missing field \"run\"");
  EXPECT_EQ(error_of(R"({"v":1,"type":"stop","run":7})"), "field \"run\" has the wrong type: 7");
  EXPECT_EQ(error_of(R"({"v":2,"type":"stop","run":"a"})"), "protocol version 2, expected 1");
  EXPECT_EQ(error_of(R"({"v":1,"type":"dance"})"), "unknown message type \"dance\"");
  EXPECT_EQ(error_of(R"([1,2])"), "not a JSON object: [1,2]");
  EXPECT_EQ(error_of(R"({"v":1,"type":"record","run":"a","seq":1,"rank":0})"),
            "missing field \"record\"");
  // Numbers of the wrong kind or range are refused, not cast: a float or a
  // value beyond int64 where an integer belongs (a fuzzer's find: casting
  // 2.7e41 to int64 is undefined behaviour), an int field beyond int.
  EXPECT_EQ(error_of(R"({"v":1,"type":"resume","run":"a","after_seq":2.5})"),
            "field \"after_seq\" has the wrong type: 2.5");
  EXPECT_EQ(error_of(R"({"v":1,"type":"resume","run":"a","after_seq":2.7e41})"),
            "field \"after_seq\" has the wrong type: 2.7e+41");
  EXPECT_EQ(error_of(R"({"v":1,"type":"resume","run":"a","after_seq":18446744073709551615})"),
            "field \"after_seq\" has the wrong type: 18446744073709551615");
  EXPECT_EQ(error_of(R"({"v":1,"type":"started","run":"a","pids":[1,2.5]})"),
            "field \"pids\" has the wrong type: [1,2.5]");
  EXPECT_EQ(
      std::get<Resume>(decode(R"({"v":1,"type":"resume","run":"a","after_seq":-1})")).after_seq,
      -1);
  // A stop's grace is bounded: SIGKILL must come within the hour.
  EXPECT_EQ(error_of(R"({"v":1,"type":"stop","run":"a","grace_s":1e300})"),
            "field \"grace_s\" must be 0 to 3600 seconds, got 1e+300");
  EXPECT_EQ(error_of(R"({"v":1,"type":"stop","run":"a","grace_s":-1})"),
            "field \"grace_s\" must be 0 to 3600 seconds, got -1");
  EXPECT_EQ(std::get<StopRun>(decode(R"({"v":1,"type":"stop","run":"a","grace_s":0})")).grace_s,
            0.0);
  // A hello of another version decodes, so that the answer can say why it is refused.
  EXPECT_EQ(std::get<Hello>(decode(R"({"v":7,"type":"hello","role":"agent"})")).version, 7);
}

TEST(LineBuffer, SplitsAcrossChunksAndSkipsOverlongLines) {
  LineBuffer buffer(8);
  std::vector<std::string> lines;
  std::vector<size_t> overlong;
  auto feed = [&](std::string_view bytes) {
    buffer.feed(
        bytes, [&](std::string_view l) { lines.emplace_back(l); },
        [&](size_t n) { overlong.push_back(n); });
  };
  feed("ab");
  feed("c\nde");
  feed("f\n0123456789");
  feed("0123\nxy\n");
  EXPECT_EQ(lines, (std::vector<std::string>{"abc", "def", "xy"}));
  EXPECT_EQ(overlong, (std::vector<size_t>{14}));
  feed("tail");
  EXPECT_EQ(buffer.take_rest(), "tail");
}

}  // namespace
}  // namespace flotilla::protocol
