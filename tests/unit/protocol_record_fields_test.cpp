// The rank records' field table: what the writer writes, what the reader
// reads and what docs/records.md lists are the same fields.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "flotilla/protocol/metric_records.h"
#include "flotilla/protocol/record_fields.h"
#include "flotilla/protocol/record_reading.h"

namespace flotilla::records {
namespace {

// Each "### `type`" section's table: the `field` names of its rows, in order.
std::map<std::string, std::vector<std::string>> documented_fields() {
  std::ifstream in(std::string(FLOTILLA_DOCS_DIR) + "/records.md");
  EXPECT_TRUE(in) << "docs/records.md";
  const std::regex section(R"(^### `([a-z_]+)`)"), row(R"(^\| `([a-z_]+)` \|)");
  std::map<std::string, std::vector<std::string>> fields;
  std::string line, type;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, section))
      type = m[1];
    else if (line.rfind("## ", 0) == 0)
      type.clear();
    else if (!type.empty() && std::regex_search(line, m, row))
      fields[type].push_back(m[1]);
  }
  return fields;
}

TEST(RecordFields, DocsListEachRecordsFieldsInTheTablesOrder) {
  const auto documented = documented_fields();
  for (const auto type : kRecordTypes) {
    SCOPED_TRACE(std::string(type));
    const auto names = field_names(type);
    ASSERT_FALSE(names.empty());
    const auto it = documented.find(std::string(type));
    ASSERT_NE(it, documented.end()) << "docs/records.md has no section for " << type;
    EXPECT_EQ(it->second, std::vector<std::string>(names.begin(), names.end()));
  }
  // And `profile`, which the engine's planner writes whole
  // (node_profile_record; its keys are checked in the engine's tests).
  EXPECT_EQ(documented.count("profile"), 1u);
  EXPECT_EQ(documented.size(), std::size(kRecordTypes) + 1);
  EXPECT_TRUE(field_names("system").empty());
}

std::set<std::string> keys_of(const std::string& line) {
  std::set<std::string> keys;
  const auto object = nlohmann::json::parse(line);
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

// A step of a pipeline stage with a compressed link under fp16 has every
// field; a DDP step leaves out the pipeline's, the codec's and fp16's.
TEST(RecordFields, AStepLineHoldsTheFieldsOfItsKindOfRunAndReadsBackTheSame) {
  Step full;
  full.rank = 3;
  full.step = 7;
  full.loss = 0.25;
  full.cached_samples = 5;
  full.stage = 1;
  full.replica = 1;
  full.busy_ms = 9.5;
  full.compression_ratio = 3.9;
  full.encode_ms = 0.5;
  full.recv_act_bytes = 4096;
  full.recv_act_ms = 1.5;
  full.recv_grad_bytes = 2048;
  full.loss_scale = 65536;
  full.skipped = true;
  const std::string line = to_line(full);
  std::set<std::string> every{"type"};
  for (const auto name : field_names("step")) every.insert(std::string(name));
  EXPECT_EQ(keys_of(line), every);
  const auto back = step_from_line(line);
  ASSERT_TRUE(back);
  EXPECT_EQ(to_line(*back), line);
  EXPECT_EQ(back->loss, 0.25);
  EXPECT_TRUE(back->skipped);

  Step ddp;
  ddp.loss.reset();  // a rank without the loss
  const auto keys = keys_of(to_line(ddp));
  for (const char* absent :
       {"loss", "stage", "replica", "busy_ms", "compression_ratio", "recv_act_bytes",
        "recv_grad_ms", "loss_scale", "skipped", "cached_samples"})
    EXPECT_EQ(keys.count(absent), 0u) << absent;
  const auto ddp_back = step_from_line(to_line(ddp));
  ASSERT_TRUE(ddp_back);
  EXPECT_FALSE(ddp_back->loss);
  EXPECT_EQ(ddp_back->stage, -1);
}

// Every field written is read: the start record's BLAS fields were written
// and never read back before the table.
TEST(RecordFields, EveryWrittenFieldOfAStartIsReadBack) {
  Start start;
  start.blas = "openblas-pthread";
  start.blas_threads = 4;
  start.engine = "/opt/flotilla/flotilla-train";
  start.machine = "boot-1";
  start.cores = 8;
  start.gradient_dtype = "bfloat16";
  start.boundary_dtype = "bfloat16";
  start.resumed_from_step = 40;
  start.block_parameters = {10, 20};
  const auto back = start_from_line(to_line(start));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->blas, "openblas-pthread");
  EXPECT_EQ(back->blas_threads, 4);
  EXPECT_EQ(to_line(*back), to_line(start));
}

TEST(RecordFields, AnEndsOutcomeIsWrittenByNameAndAnUnknownOneIsRefused) {
  End end;
  end.outcome = Outcome::oom;
  end.message = "CUDA out of memory";
  const std::string line = to_line(end);
  EXPECT_EQ(nlohmann::json::parse(line)["outcome"], "oom");
  const auto back = end_from_line(line);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->outcome, Outcome::oom);
  EXPECT_FALSE(end_from_line(R"({"type":"end","outcome":"vanished"})"));
  EXPECT_FALSE(end_from_line(R"({"type":"end","outcome":3})"));
  const auto without = end_from_line(R"({"type":"end","rank":2})");
  ASSERT_TRUE(without);
  EXPECT_EQ(without->outcome, Outcome::finished);
}

}  // namespace
}  // namespace flotilla::records
