// The controller's side of the protocol, on a scripted transport: the hello,
// malformed lines from an agent, and the run summary computed from records.
#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>

#include "agent_link.h"
#include "flotilla/controller/run_summary.h"

namespace flotilla::controller {
namespace {

using namespace std::chrono_literals;

// Hands out scripted chunks as the agent's output; records what was written.
class ScriptedTransport final : public Transport {
 public:
  explicit ScriptedTransport(std::deque<std::string> chunks) : chunks_(std::move(chunks)) {}
  bool write(std::string_view bytes) override {
    std::lock_guard lock(mutex_);
    written_ += bytes;
    return !closed_;
  }
  std::optional<std::string> read(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (chunks_.empty()) {
      if (end_after_script_ || closed_) return std::nullopt;
      lock.unlock();
      std::this_thread::sleep_for(std::min(timeout, 5ms));
      return std::string();
    }
    auto chunk = std::move(chunks_.front());
    chunks_.pop_front();
    return chunk;
  }
  void close() override {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  std::string describe() const override { return "scripted agent"; }
  bool end_after_script_ = true;

 private:
  std::mutex mutex_;
  std::deque<std::string> chunks_;
  std::string written_;
  bool closed_ = false;
};

const std::string kHello =
    R"({"v":1,"type":"hello","role":"agent","software":"test","capabilities":[]})"
    "\n";

struct Collected {
  std::mutex mutex;
  std::vector<protocol::Message> messages;
  std::vector<std::string> problems;
  bool closed = false;
};

LinkEvents collect_into(Collected& c) {
  LinkEvents events;
  events.on_message = [&c](const protocol::Message& m) {
    std::lock_guard lock(c.mutex);
    c.messages.push_back(m);
  };
  events.on_problem = [&c](const std::string& p) {
    std::lock_guard lock(c.mutex);
    c.problems.push_back(p);
  };
  events.on_closed = [&c] {
    std::lock_guard lock(c.mutex);
    c.closed = true;
  };
  return events;
}

void wait_closed(Collected& c) {
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(c.mutex);
      if (c.closed) return;
    }
    std::this_thread::sleep_for(10ms);
  }
  FAIL() << "the link never saw the end of the stream";
}

TEST(AgentLink, CountsAndReportsMalformedLinesAndKeepsReading) {
  const std::string record =
      R"({"v":1,"type":"record","run":"r","seq":1,"node":"local","rank":0,"record":{"type":"step"}})";
  std::deque<std::string> script{
      kHello,
      R"({"v":1,"type":"record","run":"r","seq")"
      "\n",  // truncated JSON
      R"({"v":1,"type":"record","run":"r","seq":"two","node":"local","rank":0,"record":{}})"
      "\n",  // wrong type
      R"({"v":1,"type":"gossip"})"
      "\n",                                                     // unknown type
      std::string(protocol::kMaxLineBytes + 1024, 'x') + "\n",  // a line too long
      "[1,2,3]\n",                                              // not an object
      record.substr(0, 30),
      record.substr(30) + "\n",  // split across reads
  };
  Collected c;
  {
    AgentLink link("local", std::make_unique<ScriptedTransport>(script), collect_into(c), 5s);
    wait_closed(c);
    EXPECT_EQ(link.malformed_lines(), 5);
  }
  ASSERT_EQ(c.problems.size(), 5u);
  EXPECT_NE(c.problems[0].find("not JSON"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[1].find("\"seq\" has the wrong type"), std::string::npos) << c.problems[1];
  EXPECT_NE(c.problems[2].find("unknown message type \"gossip\""), std::string::npos)
      << c.problems[2];
  EXPECT_NE(c.problems[3].find("longer than"), std::string::npos) << c.problems[3];
  EXPECT_NE(c.problems[4].find("(5 so far)"), std::string::npos) << c.problems[4];
  ASSERT_EQ(c.messages.size(), 1u);
  const auto* r = std::get_if<protocol::Record>(&c.messages[0]);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->seq, 1);
}

TEST(AgentLink, RefusesAnAgentOfAnotherProtocolVersion) {
  Collected c;
  try {
    AgentLink link(
        "n1",
        std::make_unique<ScriptedTransport>(std::deque<std::string>{
            R"({"v":1,"type":"error","message":"protocol version 1 is not supported: this agent speaks version 2"})"
            "\n"}),
        collect_into(c), 5s);
    FAIL() << "accepted an agent that refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("node n1: the agent refused: protocol version"),
              std::string::npos)
        << e.what();
  }
}

TEST(AgentLink, RefusesAnAgentWhoseHelloIsOfAnotherVersion) {
  Collected c;
  try {
    AgentLink link("n3",
                   std::make_unique<ScriptedTransport>(std::deque<std::string>{
                       R"({"v":2,"type":"hello","role":"agent","software":"future"})"
                       "\n"}),
                   collect_into(c), 5s);
    FAIL() << "accepted an agent of protocol version 2";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("node n3: the agent speaks protocol version 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(AgentLink, GivesUpOnASilentAgentWithAClearError) {
  Collected c;
  auto silent = std::make_unique<ScriptedTransport>(std::deque<std::string>{});
  silent->end_after_script_ = false;
  try {
    AgentLink link("n2", std::move(silent), collect_into(c), 300ms);
    FAIL() << "a silent agent was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("node n2: no hello from scripted agent"),
              std::string::npos)
        << e.what();
  }
}

RecordRow record_of(int64_t seq, int64_t rank, const nlohmann::json& body) {
  return {seq, "local", rank, body["type"], body.dump()};
}

TEST(RunSummary, IsComputedFromRankZerosRecordsAndTheAgentsSystemRecords) {
  RunRow run;
  run.id = "r";
  run.state = RunState::finished;
  std::vector<RecordRow> records;
  int64_t seq = 0;
  records.push_back(record_of(++seq, 0, {{"type", "start"}, {"steps_per_epoch", 2}}));
  for (int step = 1; step <= 4; ++step) {
    for (int rank = 0; rank < 2; ++rank)
      records.push_back(record_of(++seq, rank,
                                  {{"type", "step"},
                                   {"rank", rank},
                                   {"step", step},
                                   {"samples", 128},
                                   {"loss", 2.0 / step + rank},
                                   {"step_ms", 100.0 * step},
                                   {"samples_per_s", 128 / (0.1 * step)},
                                   {"forward_ms", 10.0},
                                   {"bytes_sent", 1000 * step}}));
    if (step % 2 == 0)
      records.push_back(record_of(++seq, 0,
                                  {{"type", "epoch"},
                                   {"rank", 0},
                                   {"epoch", step / 2 - 1},
                                   {"steps", step},
                                   {"acc_test", 0.25 * step}}));
  }
  records.push_back(record_of(++seq, -1, {{"type", "system"}, {"rank_rss", {{"0", 7}, {"1", 9}}}}));
  records.push_back(record_of(++seq, 1, {{"type", "end"}, {"rank", 1}, {"elapsed_s", 3.5}}));
  records.push_back(record_of(++seq, 0, {{"type", "end"}, {"rank", 0}, {"elapsed_s", 3.0}}));
  const auto s = summarize(run, records);
  EXPECT_EQ(s.records, seq);
  EXPECT_EQ(s.first_seq, 1);
  EXPECT_EQ(s.last_seq, seq);
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(s.epochs, 2);
  EXPECT_DOUBLE_EQ(s.final_loss, 0.5);  // rank 0's, not rank 1's 1.5
  // The steady throughput (run_metrics.h): of 4 steps the first 3 are
  // warm-up, leaving step 4's 128 samples in 400 ms.
  ASSERT_TRUE(s.samples_per_s);
  EXPECT_DOUBLE_EQ(*s.samples_per_s, 320.0);
  EXPECT_DOUBLE_EQ(s.step_ms, 250.0);
  EXPECT_DOUBLE_EQ(s.bytes_sent_per_step, 2500.0);
  EXPECT_DOUBLE_EQ(s.acc_test, 1.0);
  EXPECT_EQ(s.peak_rank_rss, 9);
  EXPECT_DOUBLE_EQ(s.elapsed_s, 3.5);
  const auto json = nlohmann::json::parse(summary_json(s));
  EXPECT_EQ(json["summary"]["steps"], 4);
  EXPECT_EQ(json["epochs"].size(), 2u);
  const auto csv = steps_csv(records);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 8);  // header and 4 steps × 2 ranks
}

// A resumed run trains its steps after the checkpoint again: the later
// attempt's record of a step or an epoch is the one counted.
TEST(RunSummary, CountsAStepOrEpochTrainedAgainByAResumedAttemptOnce) {
  RunRow run;
  run.id = "r";
  run.state = RunState::finished;
  std::vector<RecordRow> records;
  int64_t seq = 0;
  auto step = [&](int step, double loss) {
    records.push_back(record_of(
        ++seq, 0,
        {{"type", "step"}, {"rank", 0}, {"step", step}, {"loss", loss}, {"step_ms", 10.0 * step}}));
  };
  auto epoch = [&](double acc) {
    records.push_back(record_of(
        ++seq, 0, {{"type", "epoch"}, {"rank", 0}, {"epoch", 0}, {"steps", 3}, {"acc_test", acc}}));
  };
  records.push_back(record_of(++seq, 0, {{"type", "start"}}));
  for (int s = 1; s <= 3; ++s) step(s, 9.0);  // the first attempt, its epoch, then a failure
  epoch(0.1);
  records.push_back(record_of(++seq, 0, {{"type", "start"}, {"resumed_from_step", 1}}));
  for (int s = 2; s <= 3; ++s) step(s, 1.0);
  epoch(0.5);
  const auto s = summarize(run, records);
  EXPECT_EQ(s.steps, 3);
  ASSERT_EQ(s.epoch_rows.size(), 1u);
  EXPECT_DOUBLE_EQ(s.epoch_rows[0].acc_test, 0.5);
  EXPECT_DOUBLE_EQ(s.final_loss, 1.0);
  EXPECT_DOUBLE_EQ(s.step_ms, 20.0);  // steps 1, 2 and 3 once each
}

TEST(RunSummary, ShowsADashForFiguresARunWithoutStepsDoesNotHave) {
  RunRow run;
  run.id = "r";
  run.state = RunState::failed;
  run.nodes = {"local"};
  const auto s = summarize(run, {record_of(1, 0, {{"type", "start"}})});
  EXPECT_FALSE(s.samples_per_s);
  const auto table = summary_table(s);
  for (const char* row : {"throughput", "test accuracy", "step time", "final loss"}) {
    const auto at = table.find(row);
    ASSERT_NE(at, std::string::npos) << table;
    const auto line = table.substr(at, table.find('\n', at) - at);
    EXPECT_NE(line.find("—"), std::string::npos) << line;
    EXPECT_EQ(line.find("0.0"), std::string::npos) << line;
  }
  EXPECT_TRUE(nlohmann::json::parse(summary_json(s))["summary"]["samples_per_s"].is_null());
}

}  // namespace
}  // namespace flotilla::controller
