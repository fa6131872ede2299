// The controller's SQLite store and run state machine, on real database files.
#include <gtest/gtest.h>

#include <QFile>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <atomic>
#include <filesystem>
#include <thread>

#include "flotilla/controller/store.h"
#include "run_rows.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using testing::minimal_run;
using testing::TempDir;

QString db_in(const TempDir& dir) {
  return QString::fromStdString((dir.path() / "flotilla.db").string());
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
  // A SLURM job waits between its start and its nodes, its reason changing.
  EXPECT_TRUE(can_transition(S::starting, S::queued));
  EXPECT_TRUE(can_transition(S::queued, S::queued));
  EXPECT_TRUE(can_transition(S::queued, S::running));
  EXPECT_TRUE(can_transition(S::queued, S::killed));
  EXPECT_TRUE(can_transition(S::running, S::queued));  // requeued after a node was lost
  EXPECT_FALSE(can_transition(S::created, S::queued));
  for (S end : {S::finished, S::failed, S::killed, S::oom})
    for (S to : {S::created, S::starting, S::queued, S::running, S::finished, S::failed, S::killed,
                 S::oom})
      EXPECT_FALSE(can_transition(end, to)) << name_of(end) << " -> " << name_of(to);
  for (S s :
       {S::created, S::starting, S::queued, S::running, S::finished, S::failed, S::killed, S::oom})
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
    store.create_run(minimal_run("r1"));
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

// The window and a CLI started beside it opened a new database at once; the
// later one applied migration 0003 again and stopped with "table run_nodes
// already exists". Stores opened together on a new file each open it, and
// every migration is applied once.
TEST(Store, StoresOpeningANewFileTogetherApplyEachMigrationOnce) {
  TempDir dir;
  constexpr int kOpeners = 6;
  std::atomic<int> ready{0};
  std::vector<std::string> errors(kOpeners);
  std::vector<std::thread> openers;
  for (int i = 0; i < kOpeners; ++i)
    openers.emplace_back([&, i] {
      ++ready;
      while (ready.load() < kOpeners) std::this_thread::yield();  // all start together
      try {
        Store store(db_in(dir));
      } catch (const std::exception& e) {
        errors[size_t(i)] = e.what();
      }
    });
  for (auto& t : openers) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  Store store(db_in(dir));
  EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
  EXPECT_EQ(store.node_names(), std::vector<std::string>{"local"});
  EXPECT_EQ(count_rows(db_in(dir), "SELECT COUNT(*) FROM applied_migrations"),
            Store::latest_schema_version());
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
  store.create_run(minimal_run("r1"));
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

// The writer binds a record's UTF-8 as it is; bytes that are not UTF-8 are
// stored as QtSql stored them (each bad byte replaced), and the stored text
// is the same however it was bound.
TEST(Store, StoresTextAsItCameAndTextThatIsNotUtf8WithItsBadBytesReplaced) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(minimal_run("r1"));
  const std::string accented = "{\"note\":\"d\u00e9j\u00e0 \xc3\xa9t\xc3\xa9 \xf0\x9f\x9a\x80\"}";
  const std::string broken = "{\"note\":\"a\xff\xc3z\"}";
  store.append_record("r1", {1, "local", 0, "note", accented});
  store.append_record("r1", {2, "local", 0, "note", broken});
  store.append_record("r1", {3, "n\xe9", 0, "note\xff", "{}"});
  store.flush();
  const auto rows = store.records("r1");
  ASSERT_EQ(rows.size(), 3u);
  // Ordered by node: "local" before "n\ufffd".
  EXPECT_EQ(rows[0].body, accented);
  EXPECT_EQ(rows[1].body, QString::fromStdString(broken).toStdString());
  EXPECT_EQ(rows[1].body, "{\"note\":\"a\xef\xbf\xbd\xef\xbf\xbdz\"}");
  EXPECT_EQ(rows[2].node, "n\xef\xbf\xbd");
  EXPECT_EQ(rows[2].type, "note\xef\xbf\xbd");
  EXPECT_EQ(count_rows(db_in(dir), "SELECT count(*) FROM records WHERE typeof(body) = 'text'"), 3);
}

TEST(Store, MovesARunThroughItsLifeOnceWithTimestampsAndReasons) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(minimal_run("r1"));
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
  store.create_run(minimal_run("r1"));
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
  store.create_run(minimal_run("r1"));
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
  store.create_run(minimal_run("r1"));
  EXPECT_THROW(store.create_run(minimal_run("r1")), StoreError);  // the id is taken
  store.append_record("r1", a_record(1));
  store.flush();
  EXPECT_EQ(store.records("r1").size(), 1u);
  EXPECT_EQ(store.runs().size(), 1u);
}

NodeRow a_node(const std::string& name) {
  NodeRow node;
  node.name = name;
  node.host = name + ".example";
  return node;
}

TEST(Store, KeepsARunsNodesInRankOrder) {
  TempDir dir;
  Store store(db_in(dir));
  for (const char* name : {"zeta", "alpha", "mid"}) store.add_node(a_node(name));
  auto run = minimal_run("r1");
  run.nodes = {"zeta", "alpha", "mid"};
  store.create_run(run);
  EXPECT_EQ(store.run("r1")->nodes, (std::vector<std::string>{"zeta", "alpha", "mid"}));
  EXPECT_EQ(store.runs().front().nodes, run.nodes);
  EXPECT_EQ(store.live_runs().front().nodes, run.nodes);
}

// Node names may hold `_`, a LIKE wildcard: membership is matched by equality.
TEST(Store, RemovingANodeIsRefusedOnlyForItsOwnLiveRuns) {
  TempDir dir;
  Store store(db_in(dir));
  store.add_node(a_node("a_b"));
  store.add_node(a_node("axb"));
  auto run = minimal_run("on-axb");
  run.nodes = {"axb"};
  store.create_run(run);
  EXPECT_EQ(store.live_runs_on("axb"), std::vector<std::string>{"on-axb"});
  EXPECT_TRUE(store.live_runs_on("a_b").empty());
  EXPECT_NO_THROW(store.remove_node("a_b"));
  try {
    store.remove_node("axb");
    FAIL() << "removed a node a live run uses";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("on-axb"), std::string::npos) << e.what();
  }
  ASSERT_TRUE(store.transition("on-axb", RunState::failed, "done"));
  EXPECT_TRUE(store.live_runs_on("axb").empty());
  EXPECT_NO_THROW(store.remove_node("axb"));
}

// A database made by the Flotilla before run_nodes existed (schema 2): the
// comma-joined list becomes rows, in order, and nothing else changes.
TEST(Store, MigratesCommaJoinedRunNodesToRows) {
  TempDir dir;
  {
    auto db = QSqlDatabase::addDatabase("QSQLITE", "old");
    db.setDatabaseName(db_in(dir));
    ASSERT_TRUE(db.open());
    QSqlQuery q(db);
    ASSERT_TRUE(q.exec("CREATE TABLE schema_version (version INTEGER NOT NULL)"));
    for (const char* file : {"0001_initial.sql", "0002_node_access.sql"}) {
      QFile sql(QString(FLOTILLA_MIGRATIONS_DIR) + "/" + file);
      ASSERT_TRUE(sql.open(QIODevice::ReadOnly)) << file;
      QString statement;
      for (const QString& line : QString::fromUtf8(sql.readAll()).split('\n')) {
        if (line.trimmed().startsWith("--")) continue;
        statement += line + '\n';
        if (line.trimmed().endsWith(';')) {
          ASSERT_TRUE(q.exec(statement)) << statement.toStdString();
          statement.clear();
        }
      }
    }
    ASSERT_TRUE(q.exec("INSERT INTO schema_version VALUES (2)"));
    ASSERT_TRUE(
        q.exec("INSERT INTO runs (id, experiment_name, config_json, nodes, world_size, state, "
               "created_ms) VALUES ('old', 'exp', '{}', 'a_b,axb, c', 3, 'running', 1), "
               "('alone', 'exp', '{}', 'local', 1, 'finished', 2)"));
    db.close();
  }
  QSqlDatabase::removeDatabase("old");
  Store store(db_in(dir));
  EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
  EXPECT_EQ(store.run("old")->nodes, (std::vector<std::string>{"a_b", "axb", "c"}));
  EXPECT_EQ(store.run("old")->state, RunState::running);
  EXPECT_EQ(store.run("alone")->nodes, std::vector<std::string>{"local"});
  EXPECT_EQ(store.live_runs_on("axb"), std::vector<std::string>{"old"});
}

// A database that reached version 6 before 0004_step_buckets was written
// (it was numbered below 0005 and 0006 after they existed): a view refuses
// it naming the missing migration, and the next writer applies 0004, filling
// the buckets of the runs already stored and keeping them from then on.
TEST(Store, AppliesAMigrationNumberedBelowTheVersionTheDatabaseReached) {
  TempDir dir;
  {
    Store store(db_in(dir));
    store.create_run(minimal_run("old"));
    for (int64_t seq = 1; seq <= 300; ++seq) store.append_record("old", a_record(seq));
    store.flush();
  }
  {
    // Back to what main's Flotilla left: no step_buckets, no applied_migrations.
    auto db = QSqlDatabase::addDatabase("QSQLITE", "before");
    db.setDatabaseName(db_in(dir));
    ASSERT_TRUE(db.open());
    QSqlQuery q(db);
    ASSERT_TRUE(q.exec("DROP TRIGGER IF EXISTS step_buckets_on_insert"));
    ASSERT_TRUE(q.exec("DROP TABLE step_buckets"));
    ASSERT_TRUE(q.exec("DROP TABLE applied_migrations"));
    // Nor the columns and tables of migrations after 6 (0008's node kinds,
    // 0010's predictions, 0011's node engines, 0012's node profiles).
    for (const char* column :
         {"kind", "slurm_partition", "slurm_account", "torch_prefix", "engine_json"})
      ASSERT_TRUE(q.exec(QString("ALTER TABLE nodes DROP COLUMN %1").arg(column)))
          << q.lastError().text().toStdString();
    ASSERT_TRUE(q.exec("DROP TABLE run_predictions"));
    ASSERT_TRUE(q.exec("DROP TABLE node_profiles"));
    ASSERT_TRUE(q.exec("UPDATE schema_version SET version = 6"));
    db.close();
  }
  QSqlDatabase::removeDatabase("before");
  try {
    Store view(db_in(dir), {}, StoreAccess::read_only);
    FAIL() << "a view read a database without step_buckets";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("0004_step_buckets.sql"), std::string::npos) << e.what();
  }
  EXPECT_EQ(
      count_rows(db_in(dir), "SELECT count(*) FROM sqlite_master WHERE name = 'step_buckets'"), 0);

  Store store(db_in(dir));
  EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
  auto buckets = store.step_buckets("old");
  ASSERT_EQ(buckets.size(), 2u);  // steps 1..256 and 257..300
  EXPECT_EQ(buckets[0].records, 256);
  EXPECT_EQ(buckets[1].records, 44);
  store.append_record("old", a_record(301));
  store.flush();
  buckets = store.step_buckets("old");
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[1].records, 45);
  // Every migration is recorded once (their numbers run 1..latest without a gap).
  EXPECT_EQ(count_rows(db_in(dir), "SELECT count(DISTINCT version) FROM applied_migrations"),
            Store::latest_schema_version());
  EXPECT_EQ(count_rows(db_in(dir), "SELECT count(*) FROM applied_migrations WHERE version = 4"), 1);
  EXPECT_NO_THROW(Store(db_in(dir), {}, StoreAccess::read_only));
}

// 0009 widens the runs' state CHECK for 'queued' in place: a database of
// version 8 keeps every run and record, and a connection opened before the
// migration (another process's) reads the new schema too.
TEST(Store, QueuedIsAStateADatabaseFromBeforeItTakesWithEveryRecordKept) {
  TempDir dir;
  {
    Store store(db_in(dir));
    store.create_run(minimal_run("old"));
    store.create_run(minimal_run("waiting"));
    for (int64_t seq = 1; seq <= 50; ++seq) store.append_record("old", a_record(seq));
    store.flush();
  }
  auto db = QSqlDatabase::addDatabase("QSQLITE", "version8");
  db.setDatabaseName(db_in(dir));
  ASSERT_TRUE(db.open());
  {
    QSqlQuery q(db);
    ASSERT_TRUE(q.exec("PRAGMA schema_version") && q.next());
    const qlonglong version = q.value(0).toLongLong();
    // Back to 0008's schema: 'queued' refused by the CHECK.
    ASSERT_TRUE(q.exec("PRAGMA writable_schema = ON"));
    ASSERT_TRUE(
        q.exec("UPDATE sqlite_master SET sql = replace(sql, '''queued'', ', '') WHERE "
               "type = 'table' AND name = 'runs'"));
    ASSERT_TRUE(q.exec("PRAGMA writable_schema = OFF"));
    ASSERT_TRUE(q.exec(QString("PRAGMA schema_version = %1").arg(version + 1)));
    ASSERT_TRUE(q.exec("DELETE FROM applied_migrations WHERE version = 9"));
    ASSERT_TRUE(q.exec("UPDATE schema_version SET version = 8"));
    EXPECT_FALSE(q.exec("UPDATE runs SET state = 'queued' WHERE id = 'waiting'"));
  }
  {
    Store store(db_in(dir));  // migrates to 9
    EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
    EXPECT_TRUE(store.transition("waiting", RunState::starting));
    EXPECT_TRUE(store.transition("waiting", RunState::queued, "SLURM job 7 waits: Priority"));
    EXPECT_TRUE(store.transition("waiting", RunState::queued, "SLURM job 7 waits: Resources"));
    EXPECT_TRUE(store.transition("waiting", RunState::running, "SLURM job 7 on flh[1-2]"));
    const auto run = store.run("waiting");
    EXPECT_EQ(run->state, RunState::running);
    ASSERT_TRUE(run->starting_ms && run->running_ms);
    EXPECT_EQ(store.transitions("waiting")[2].reason, "SLURM job 7 waits: Priority");
    EXPECT_EQ(store.records("old").size(), 50u);
  }
  // The connection opened before the migration takes 'queued' as well.
  {
    QSqlQuery q(db);
    EXPECT_TRUE(q.exec("UPDATE runs SET state = 'queued' WHERE id = 'old'"))
        << q.lastError().text().toStdString();
    EXPECT_FALSE(q.exec("UPDATE runs SET state = 'paused' WHERE id = 'old'"));
  }
  db.close();
  db = QSqlDatabase();
  QSqlDatabase::removeDatabase("version8");
  EXPECT_EQ(count_rows(db_in(dir), "SELECT count(*) FROM records WHERE run_id = 'old'"), 50);
  EXPECT_EQ(count_rows(db_in(dir), "SELECT count(*) FROM runs"), 2);
}

TEST(Store, ReadsRecordsByTypeRankAndNodeThroughAnIndex) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(minimal_run("r1"));
  int64_t seq = 0;
  for (const char* node : {"n1", "n2"})
    for (int64_t rank : {-1, 0, 1})
      for (const char* type : {"step", "system"})
        store.append_record("r1", {++seq, node, rank, type, "{}"});
  store.flush();
  EXPECT_EQ(store.records("r1").size(), 12u);
  const auto steps_of_1 = store.records("r1", RecordFilter{"step", 1, std::nullopt});
  ASSERT_EQ(steps_of_1.size(), 2u);
  for (const auto& r : steps_of_1) EXPECT_TRUE(r.type == "step" && r.rank == 1);
  EXPECT_EQ(steps_of_1[0].node, "n1");  // ordered by node, then seq
  const auto system_n2 = store.records("r1", RecordFilter{"system", -1, "n2"});
  ASSERT_EQ(system_n2.size(), 1u);
  EXPECT_EQ(system_n2[0].node, "n2");
  EXPECT_EQ(store.records("r1", RecordFilter{"step", std::nullopt, std::nullopt}, 6).size(), 3u);

  // One rank's steps come from the index, in order, without reading the
  // run's other records or sorting them.
  const auto plan = store.records_query_plan("r1", RecordFilter{"step", 0, std::nullopt});
  EXPECT_NE(plan.find("USING INDEX records_by_type_rank (run_id=? AND type=? AND rank=?)"),
            std::string::npos)
      << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << plan;
}

// A long run is read a page at a time: the pages, each after the last
// record of the one before, hold every record once, in the order records()
// gives them, across the nodes.
TEST(Store, ReadsARunsRecordsPageByPageInOrder) {
  TempDir dir;
  Store store(db_in(dir));
  store.create_run(minimal_run("r1"));
  store.create_run(minimal_run("r2"));
  for (const char* node : {"n2", "n1"})
    for (int64_t seq = 1; seq <= 7; ++seq)
      store.append_record("r1", {seq, node, 0, "step", "{\"step\": " + std::to_string(seq) + "}"});
  store.append_record("r2", {1, "n1", 0, "step", "{}"});  // another run's: never in r1's pages
  store.flush();
  std::vector<RecordRow> paged;
  std::string node;
  int64_t seq = 0;
  size_t pages = 0;
  for (;;) {
    const auto page = store.records_page("r1", node, seq, 3);
    ASSERT_LE(page.size(), 3u);
    ++pages;
    paged.insert(paged.end(), page.begin(), page.end());
    if (page.size() < 3) break;
    node = page.back().node, seq = page.back().seq;
  }
  EXPECT_EQ(pages, 5u);  // 14 records: 3 + 3 + 3 + 3 + 2
  const auto all = store.records("r1");
  ASSERT_EQ(paged.size(), all.size());
  ASSERT_EQ(all.size(), 14u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(paged[i].node, all[i].node) << i;
    EXPECT_EQ(paged[i].seq, all[i].seq) << i;
    EXPECT_EQ(paged[i].body, all[i].body) << i;
  }
  EXPECT_EQ(paged.front().node, "n1");
  EXPECT_TRUE(store.records_page("r1", "n2", 7, 3).empty());
}

}  // namespace
}  // namespace flotilla::controller
