// The supervisor's reading of a rank's stdout (agent/src/rank_records.h):
// what it spools and what it believes of a rank's end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "flotilla/protocol/messages.h"
#include "rank_records.h"

using namespace flotilla;
using namespace std::string_literals;

TEST(RankRecords, ARecordWithoutTimeGetsTheArrivalTime) {
  const auto line = agent::read_rank_line(R"({"type":"step","rank":0,"step":3})", 1700000000.5);
  ASSERT_TRUE(line);
  EXPECT_FALSE(line->is_end);
  EXPECT_EQ(nlohmann::json::parse(line->record_json)["time"], 1700000000.5);
}

TEST(RankRecords, ARecordWithItsOwnTimeIsSpooledAsItCame) {
  const std::string text = R"({"type":"end","outcome":"finished","time":12.5})";
  const auto line = agent::read_rank_line(text, 99);
  ASSERT_TRUE(line);
  EXPECT_TRUE(line->is_end);
  EXPECT_EQ(line->record_json, text);
}

// Found by fuzzing: nlohmann ends its input at a NUL, so this line parsed as
// the object before it and was spooled whole; the controller could not decode
// the spool line, and the record was lost.
TEST(RankRecords, ALineWithNulsAfterTheObjectIsMalformed) {
  const std::string text = "{\"type\":\"step\",\"time\":1}\0\0junk"s;
  EXPECT_FALSE(agent::read_rank_line(text, 1));
  EXPECT_THROW(protocol::decode("{\"v\":1,\"type\":\"probe\"}\0x"s), protocol::DecodeError);
}

TEST(RankRecords, WhatIsNotOneJsonObjectIsMalformed) {
  for (const std::string text : {"", "step 3 loss 0.5", "[1,2]", "{\"a\":1} {\"b\":2}", "{\"a\":"})
    EXPECT_FALSE(agent::read_rank_line(text, 1)) << text;
}

TEST(RankRecords, EveryAcceptedLineMakesADecodableSpoolRecord) {
  for (const std::string text : {R"({"type":"step"})", R"({"time":1,"x":"\u0000"})"}) {
    const auto line = agent::read_rank_line(text, 1);
    ASSERT_TRUE(line) << text;
    const auto spooled = protocol::encode(protocol::Record{"r", 1, "n", 0, line->record_json, {}});
    EXPECT_NO_THROW(protocol::decode(spooled)) << spooled;
  }
}

TEST(RankRecords, AnEndSaysItsOutcomeMessageAndTime) {
  const auto end = agent::read_rank_end(
      R"({"type":"end","outcome":"oom","message":"out of memory at batch 512","wall_time":5.5})");
  ASSERT_TRUE(end);
  EXPECT_EQ(end->outcome, "oom");
  EXPECT_EQ(end->message, "out of memory at batch 512");
  EXPECT_EQ(end->wall_time, 5.5);
  const auto no_time = agent::read_rank_end(R"({"type":"end","outcome":"failed"})");
  ASSERT_TRUE(no_time);
  EXPECT_EQ(no_time->wall_time, agent::kNoWallTime);
}

// Found by fuzzing: the supervisor read `outcome` with nlohmann's value(),
// which throws when it is not text, and the run ended with the exception's
// words instead of the rank's failure.
TEST(RankRecords, AnEndWhoseFieldsHaveTheWrongTypeIsMalformedNotThrown) {
  for (const std::string text :
       {R"({"type":"end","outcome":5})", R"({"type":"end","outcome":"banana"})",
        R"({"type":"end","outcome":"failed","message":["a"]})",
        R"({"type":"end","outcome":"failed","wall_time":"soon"})"}) {
    std::optional<agent::RankEnd> end;
    EXPECT_NO_THROW(end = agent::read_rank_end(text)) << text;
    EXPECT_FALSE(end) << text;
  }
}

// A rank's failure message quotes its stderr, which may hold bytes that are
// not UTF-8, or be cut at 200 bytes inside a character: the run_end still
// encodes (bad bytes as U+FFFD) instead of nlohmann throwing from dump().
TEST(RankRecords, ARunEndQuotingBytesThatAreNotUtf8StillEncodes) {
  const protocol::RunEnd end{"r", 3, "failed", "rank 0: caf\xC3 \xFF"};
  std::string line;
  ASSERT_NO_THROW(line = protocol::encode(end));
  const auto decoded = std::get<protocol::RunEnd>(protocol::decode(line));
  EXPECT_EQ(decoded.message, "rank 0: caf\xEF\xBF\xBD \xEF\xBF\xBD");
}
