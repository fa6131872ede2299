// The controller's SQLite store and run state machine, on real database files.
#include <gtest/gtest.h>

#include <QSqlDatabase>
#include <QSqlQuery>
#include <filesystem>
#include <thread>

#include "store.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using testing::TempDir;

QString db_in(const TempDir& dir) {
  return QString::fromStdString((dir.path() / "flotilla.db").string());
}

RunRow a_run(const std::string& id) {
  RunRow run;
  run.id = id;
  run.experiment_name = "exp";
  run.config_json = "{}";
  run.nodes = "local";
  run.world_size = 2;
  run.created_ms = now_ms();
  return run;
}

RecordRow a_record(int64_t seq, const std::string& node = "local") {
  return {seq, node, 0, "step", "{\"type\":\"step\",\"step\":" + std::to_string(seq) + "}"};
}

// Reads with a plain connection of its own, not through the Store under test.
int64_t count_rows(const QString& path, const QString& sql) {
  int64_t n = -1;
  {
    auto db = QSqlDatabase::addDatabase("QSQLITE", "count");
    db.setDatabaseName(path);
    EXPECT_TRUE(db.open());
    QSqlQuery q(db);
    EXPECT_TRUE(q.exec(sql));
    if (q.next()) n = q.value(0).toLongLong();
  }
  QSqlDatabase::removeDatabase("count");
  return n;
}

TEST(RunStateMachine, AllowsOnlyForwardMovesAndNothingAfterAnEnd) {
  using S = RunState;
  EXPECT_TRUE(can_transition(S::created, S::starting));
  EXPECT_TRUE(can_transition(S::starting, S::running));
  EXPECT_TRUE(can_transition(S::running, S::finished));
  EXPECT_TRUE(can_transition(S::running, S::oom));
  EXPECT_TRUE(can_transition(S::starting, S::failed));  // ended before it was seen running
  EXPECT_TRUE(can_transition(S::created, S::killed));
  EXPECT_FALSE(can_transition(S::created, S::running));
  EXPECT_FALSE(can_transition(S::running, S::starting));
  EXPECT_FALSE(can_transition(S::running, S::created));
  for (S end : {S::finished, S::failed, S::killed, S::oom})
    for (S to : {S::created, S::starting, S::running, S::finished, S::failed, S::killed, S::oom})
      EXPECT_FALSE(can_transition(end, to)) << name_of(end) << " -> " << name_of(to);
  for (S s : {S::created, S::starting, S::running, S::finished, S::failed, S::killed, S::oom})
    EXPECT_EQ(run_state_from_name(name_of(s)), s);
  EXPECT_FALSE(run_state_from_name("paused"));
}

TEST(Store, CreatesTheSchemaInWalModeAndKeepsDataAcrossReopening) {
  TempDir dir;
  {
    Store store(db_in(dir));
    EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
    EXPECT_GE(Store::latest_schema_version(), 1);
    EXPECT_EQ(store.node_names(), std::vector<std::string>{"local"});
    store.save_experiment("mnist", R"({"name":"mnist"})");
    store.create_run(a_run("r1"));
  }
  Store again(db_in(dir));
  EXPECT_EQ(again.experiments().size(), 1u);
  ASSERT_TRUE(again.run("r1"));
  EXPECT_EQ(again.run("r1")->state, RunState::created);
  EXPECT_EQ(again.node_names().size(), 1u);  // the migration ran once, not twice
  auto db = QSqlDatabase::addDatabase("QSQLITE", "mode");
  {
    db.setDatabaseName(db_in(dir));
    ASSERT_TRUE(db.open());
    QSqlQuery q(db);
    ASSERT_TRUE(q.exec("PRAGMA journal_mode") && q.next());
    EXPECT_EQ(q.value(0).toString(), "wal");
    db.close();
  }
  db = QSqlDatabase();
  QSqlDatabase::removeDatabase("mode");
}

TEST(Store, RefusesADatabaseFromANewerFlotillaAndLeavesItAlone) {
  TempDir dir;
  { Store store(db_in(dir)); }
  {
    auto db = QSqlDatabase::addDatabase("QSQLITE", "bump");
    db.setDatabaseName(db_in(dir));
    ASSERT_TRUE(db.open());
    QSqlQuery(db).exec("UPDATE schema_version SET version = 999");
    db.close();
  }
  QSqlDatabase::removeDatabase("bump");
  try {
    Store store(db_in(dir));
    FAIL() << "a newer schema was accepted";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 999"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_rows(db_in(dir), "SELECT version FROM schema_version"), 999);
}

TEST(Store, NamesTheFileItCannotOpen) {
  TempDir dir;
  const auto blocker = dir.write("not-a-dir", "x");
  try {
    Store store(QString::fromStdString((blocker / "flotilla.db").string()));
    FAIL() << "opened a database under a file";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("not-a-dir"), std::string::npos) << e.what();
  }
}

TEST(Store, StoresARecordOnceHoweverOftenItArrives) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(a_run("r1"));
  for (int64_t seq = 1; seq <= 5; ++seq) store.append_record("r1", a_record(seq));
  for (int64_t seq = 3; seq <= 8; ++seq) store.append_record("r1", a_record(seq));  // a resume
  store.append_record("r1", a_record(1, "other-node"));  // seq counts per node
  store.flush();
  const auto rows = store.records("r1");
  ASSERT_EQ(rows.size(), 9u);
  EXPECT_EQ(store.last_seq("r1", "local"), 8);
  EXPECT_EQ(store.last_seq("r1", "other-node"), 1);
  EXPECT_EQ(store.last_seq("r1", "nowhere"), 0);
  EXPECT_EQ(count_rows(db_in(dir), "SELECT COUNT(DISTINCT seq) FROM records WHERE node='local'"),
            8);
  EXPECT_EQ(store.records("r1", 6).size(), 2u);  // seq 7 and 8 of local
}

TEST(Store, MovesARunThroughItsLifeOnceWithTimestampsAndReasons) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(a_run("r1"));
  EXPECT_FALSE(store.transition("r1", RunState::running));  // not from created
  EXPECT_TRUE(store.transition("r1", RunState::starting));
  EXPECT_TRUE(store.transition("r1", RunState::running));
  EXPECT_TRUE(store.transition("r1", RunState::failed, "rank 1: boom"));
  EXPECT_FALSE(store.transition("r1", RunState::killed, "late stop"));  // an end is final
  const auto run = store.run("r1");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->state, RunState::failed);
  EXPECT_EQ(run->reason, "rank 1: boom");
  ASSERT_TRUE(run->starting_ms && run->running_ms && run->ended_ms);
  EXPECT_LE(run->created_ms, *run->starting_ms);
  EXPECT_LE(*run->starting_ms, *run->running_ms);
  EXPECT_LE(*run->running_ms, *run->ended_ms);
  const auto history = store.transitions("r1");
  ASSERT_EQ(history.size(), 4u);
  EXPECT_EQ(history[0].state, RunState::created);
  EXPECT_EQ(history[3].state, RunState::failed);
  EXPECT_EQ(history[3].reason, "rank 1: boom");
  EXPECT_TRUE(store.live_runs().empty());
  EXPECT_THROW(store.transition("nope", RunState::starting), StoreError);
}

TEST(Store, UpdatesAnExperimentInPlaceUnderItsName) {
  TempDir dir;
  Store store(db_in(dir));
  const auto id = store.save_experiment("a", R"({"batch_size":1})");
  EXPECT_EQ(store.save_experiment("a", R"({"batch_size":2})"), id);
  EXPECT_NE(store.save_experiment("b", "{}"), id);
  ASSERT_EQ(store.experiments().size(), 2u);
  EXPECT_EQ(store.experiment("a")->config_json, R"({"batch_size":2})");
  EXPECT_FALSE(store.experiment("c"));
}

TEST(Store, CommitsRecordsFromManyThreadsInBatches) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(a_run("r1"));
  constexpr int kThreads = 4, kEach = 2500;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) store.append_record("r1", a_record(t * kEach + i + 1));
    });
  for (auto& w : writers) w.join();
  store.flush();
  EXPECT_EQ(count_rows(db_in(dir), "SELECT COUNT(*) FROM records"), kThreads * kEach);
  EXPECT_EQ(store.last_seq("r1", "local"), kThreads * kEach);
}

TEST(Store, CommitsABurstOfRecordsAsOneTransactionNotOneEach) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(a_run("r1"));
  const int64_t before = store.commits();
  {
    // Another process holds the write lock, so the burst piles up in the queue.
    auto db = QSqlDatabase::addDatabase("QSQLITE", "holder");
    db.setDatabaseName(db_in(dir));
    ASSERT_TRUE(db.open());
    QSqlQuery hold(db);
    ASSERT_TRUE(hold.exec("BEGIN IMMEDIATE"));
    for (int64_t seq = 1; seq <= 1000; ++seq) store.append_record("r1", a_record(seq));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(hold.exec("COMMIT"));
    hold = QSqlQuery();
    db.close();
  }
  QSqlDatabase::removeDatabase("holder");
  store.flush();
  EXPECT_EQ(count_rows(db_in(dir), "SELECT COUNT(*) FROM records"), 1000);
  // At most: the records the writer took before the lock, the rest, the flush.
  EXPECT_LE(store.commits() - before, 3);
}

TEST(Store, ReportsAWriteThatFailsWithoutLosingWhatCameBefore) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(a_run("r1"));
  EXPECT_THROW(store.create_run(a_run("r1")), StoreError);  // the id is taken
  store.append_record("r1", a_record(1));
  store.flush();
  EXPECT_EQ(store.records("r1").size(), 1u);
  EXPECT_EQ(store.runs().size(), 1u);
}

}  // namespace
}  // namespace flotilla::controller
