// keep_runs: a database of some runs only, as a study's report keeps beside
// itself (study.db). Written from a real store with other runs and a node's
// access in it, then opened as a store of its own.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "flotilla/controller/kept_runs.h"
#include "flotilla/controller/store.h"
#include "run_rows.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using testing::minimal_run;
using testing::TempDir;

void store_steps(Store& store, const std::string& run, int steps) {
  int64_t seq = 0;
  for (int step = 1; step <= steps; ++step)
    store.append_record(run, RecordRow{++seq, "local", 0, "step",
                                       nlohmann::json{{"type", "step"},
                                                      {"step", step},
                                                      {"samples_per_s", 100.0 + step},
                                                      {"step_ms", 10.0}}
                                           .dump()});
}

TEST(KeepRuns, TheKeptDatabaseHoldsTheGivenRunsWholeAndNothingElse) {
  TempDir dir;
  const auto source = dir.path() / "all.db";
  const auto kept_file = dir.path() / "report" / "study.db";
  std::filesystem::create_directories(kept_file.parent_path());
  {
    Store store(QString::fromStdString(source.string()));
    NodeRow node;
    node.name = "gpu-a";
    node.host = "10.0.0.7";
    node.user = "alice";
    node.key_file = "/home/alice/.ssh/id_ed25519";
    store.add_node(node);
    for (const char* id : {"kept-1", "kept-2", "other"}) {
      store.create_run(minimal_run(id));
      store.transition(id, RunState::starting);
      store.transition(id, RunState::running);
      store_steps(store, id, std::string(id) == "kept-2" ? 700 : 300);  // 700: three buckets
      store.transition(id, RunState::finished, "done");
    }
    keep_runs(store, {"kept-1", "kept-2"}, std::nullopt, kept_file);

    Store kept(QString::fromStdString(kept_file.string()));
    std::vector<std::string> ids;
    for (const auto& run : kept.runs()) ids.push_back(run.id);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<std::string>{"kept-1", "kept-2"}));
    for (const char* id : {"kept-1", "kept-2"}) {
      SCOPED_TRACE(id);
      const auto original = store.records(id), copied = kept.records(id);
      ASSERT_EQ(copied.size(), original.size());
      for (size_t i = 0; i < original.size(); ++i) {
        EXPECT_EQ(copied[i].seq, original[i].seq);
        EXPECT_EQ(copied[i].body, original[i].body);
      }
      EXPECT_EQ(kept.run(id)->state, RunState::finished);
      EXPECT_EQ(kept.run(id)->reason, "done");
      EXPECT_EQ(kept.step_buckets(id).size(), store.step_buckets(id).size());
    }
    EXPECT_FALSE(kept.run("other"));
    // Where and as whom this machine logs in stays in its own database.
    EXPECT_FALSE(kept.node("gpu-a"));
  }
}

// A report written again beside its kept database (`flotilla --db study.db
// study report S -o .`) keeps into the file it reads: nothing of it is lost.
TEST(KeepRuns, KeepingIntoTheStoresOwnFileLosesNothing) {
  TempDir dir;
  const auto file = dir.path() / "study.db";
  {
    Store store(QString::fromStdString(file.string()));
    for (const char* id : {"a", "b"}) {
      store.create_run(minimal_run(id));
      store_steps(store, id, 10);
    }
    const auto here = std::filesystem::current_path();
    std::filesystem::current_path(dir.path());
    keep_runs(store, {"a"}, std::nullopt, "study.db");  // the same file, named relatively
    std::filesystem::current_path(here);
  }
  Store reopened(QString::fromStdString(file.string()));  // what the file holds now
  EXPECT_EQ(reopened.runs().size(), 2u);
  EXPECT_EQ(reopened.records("a").size(), 10u);
  EXPECT_EQ(reopened.records("b").size(), 10u);
}

TEST(KeepRuns, AnUnknownRunKeepsNothingOfItAndTheRestWhole) {
  TempDir dir;
  Store store(QString::fromStdString((dir.path() / "all.db").string()));
  store.create_run(minimal_run("real"));
  store_steps(store, "real", 5);
  const auto kept_file = dir.path() / "kept.db";
  keep_runs(store, {"real", "no-such-run"}, std::nullopt, kept_file);
  Store kept(QString::fromStdString(kept_file.string()));
  ASSERT_EQ(kept.runs().size(), 1u);
  EXPECT_EQ(kept.records("real").size(), 5u);
}

}  // namespace
}  // namespace flotilla::controller
