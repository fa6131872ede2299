// The step buckets kept by the store's writer (store_buckets.cpp) against the
// trigger that kept them up to migration 0006 (0004_step_buckets.sql): the
// same records stored both ways give the same step_buckets, row by row, and
// a database whose buckets the trigger made keeps them and grows them as the
// trigger would have.
#include <gtest/gtest.h>

#include <QFile>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QSqlRecord>
#include <QVariant>

#include <cmath>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"
#include "run_rows.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using testing::minimal_run;
using testing::TempDir;

struct Stored {
  std::string run;
  RecordRow record;
};

std::string number(double v) {
  return QString::number(v, 'g', 17).toStdString();
}

// Full step records of ranks 0 and 1 over three buckets, "lr" absent, null,
// text, a boolean, an object or an array on some steps.
std::vector<Stored> ordinary_steps(int64_t& seq) {
  std::vector<Stored> records;
  for (int64_t step = 1; step <= 700; ++step) {
    for (int64_t rank : {0, 1}) {
      const double jitter = std::sin(double(step) * 0.37 + double(rank));
      std::string body = "{\"type\":\"step\",\"rank\":" + std::to_string(rank) +
                         ",\"step\":" + std::to_string(step) +
                         ",\"epoch\":" + std::to_string(step / 300) +
                         ",\"time\":" + number(1.7e9 + double(step) * 0.123) +
                         ",\"loss\":" + number(2.3 / (1 + 0.01 * double(step)) + 0.01 * jitter) +
                         ",\"samples\":64,\"step_ms\":" + number(19.7 + jitter);
      if (step % 13 == 0)
        body += ",\"lr\":{\"base\":0.1}";
      else if (step % 11 == 0)
        body += ",\"lr\":true";
      else if (step % 7 == 0)
        body += ",\"lr\":\"0.1\"";
      else if (step % 5 == 0)
        body += ",\"lr\":null";
      else if (step % 17 == 0)
        body += ",\"lr\":[0.1]";
      else if (step % 3 != 0)
        body += ",\"lr\":" + number(0.1 / double(1 + step / 100));
      records.push_back({"r1", {++seq, "local", rank, "step", body + "}"}});
    }
  }
  return records;
}

// What the trigger handles apart: odd steps, odd bodies, records that are
// not steps or not stored.
std::vector<Stored> odd_records(int64_t& seq) {
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"step", R"({"step":1.5,"loss":1})"},
      {"step", R"({"step":256.9,"loss":2})"},  // CAST to 256: bucket 0
      {"step", R"({"step":257.0,"loss":3})"},
      {"step", R"({"step":0,"loss":4})"},
      {"step", R"({"step":-1})"},
      {"step", R"({"step":-300,"loss":5})"},
      {"step", R"({"step":1e300})"},
      {"step", R"({"step":-1e300})"},
      {"step", R"({"step":9223372036854775807})"},
      {"step", R"({"step":-9223372036854775808})"},
      {"step", R"({"step":18446744073709551615})"},
      {"step", R"({"step":1e19,"loss":6})"},
      {"step", R"({"step":4,"loss":"x","loss":2.5})"},  // the first "loss" is text
      {"step", R"({"step":4,"loss":2.5,"loss":"x"})"},
      {"step", R"({"step":4,"step":"x","loss":1})"},
      {"step", R"({"step":"x","step":4,"loss":1})"},
      {"step", R"({"step":"5","loss":1})"},
      {"step", R"({"step":null,"loss":1})"},
      {"step", R"({"step":true,"loss":1})"},
      {"step", R"({"loss":1})"},
      {"step", R"({})"},
      {"step", R"({"step":6,"extra":{"loss":7,"step":9}})"},
      {"step", R"({"extra":{"step":9},"loss":7})"},
      {"step", R"({"step":7,"loss":1.7e308})"},
      {"step", R"({"step":8,"loss":1.7e308})"},  // the sum overflows to infinity
      {"step", R"({"step":3,)"},
      {"step", R"([{"step":3}])"},
      {"step", "3"},
      {"step", ""},
      {"step", "not json"},
      {"step", "{\"step\":9,\"note\":\"\xff\",\"loss\":0.5}"},  // not UTF-8 inside a string
      {"step", "  {\"step\": 11 , \"loss\" : 1E+2 }  "},
      {"step", R"({"step":12,"lr":1e-320,"mem_peak":12345678901234567})"},
      {"epoch", R"({"step":3,"loss":1})"},
      {"Step", R"({"step":3,"loss":1})"},
  };
  std::vector<Stored> records;
  for (const auto& [type, body] : bodies)
    records.push_back({"r1", {++seq, "local", 2, type, body}});
  records.push_back({"r1", {++seq, "local", -1, "system", R"({"step":3,"cpu":50})"}});
  // Seen again after a reattach: ignored, so in no bucket twice.
  records.push_back({"r1", {1, "local", 0, "step", R"({"step":1,"loss":99})"}});
  // A run that does not exist: the record is refused, and joins no bucket.
  records.push_back({"missing", {1, "local", 0, "step", R"({"step":1,"loss":1})"}});
  // A run of its own, checked by hand below.
  records.push_back({"r2", {1, "local", 0, "step", R"({"step":1,"loss":1})"}});
  records.push_back({"r2", {2, "local", 0, "step", R"({"step":2,"loss":2})"}});
  records.push_back({"r2", {3, "local", 0, "step", R"({"step":3})"}});
  return records;
}

QString db_in(const TempDir& dir, const char* name) {
  return QString::fromStdString((dir.path() / name).string());
}

// A plain connection, closed and removed at scope end.
class Connection {
 public:
  explicit Connection(const QString& path) : name_("buckets-" + QString::number(next_++)) {
    db_ = QSqlDatabase::addDatabase("QSQLITE", name_);
    db_.setDatabaseName(path);
    if (!db_.open()) ADD_FAILURE() << db_.lastError().text().toStdString();
    exec("PRAGMA foreign_keys = ON");  // as the store's writer has it
  }
  ~Connection() {
    db_.close();
    db_ = {};
    QSqlDatabase::removeDatabase(name_);
  }
  QSqlQuery exec(const QString& sql) {
    QSqlQuery q(db_);
    EXPECT_TRUE(q.exec(sql)) << sql.left(80).toStdString() << ": "
                             << q.lastError().text().toStdString();
    return q;
  }
  QSqlDatabase& db() { return db_; }

 private:
  static inline int next_ = 0;
  QString name_;
  QSqlDatabase db_;
};

// The records stored as the writer stored them up to migration 0006: its
// INSERT, with 0004's trigger keeping the buckets.
class TriggerPath {
 public:
  explicit TriggerPath(const QString& path) : connection_(path) {
    QFile migration(":/migrations/0004_step_buckets.sql");
    EXPECT_TRUE(migration.open(QIODevice::ReadOnly));
    const QString script = QString::fromUtf8(migration.readAll());
    const auto trigger = script.indexOf("CREATE TRIGGER step_buckets_on_insert");
    EXPECT_GE(trigger, 0);
    connection_.exec(script.mid(trigger).trimmed());
  }
  void store(const std::vector<Stored>& records) {
    connection_.exec("BEGIN");
    QSqlQuery insert(connection_.db());
    insert.prepare(
        "INSERT OR IGNORE INTO records (run_id, seq, node, rank, type, body) "
        "VALUES (?, ?, ?, ?, ?, ?)");
    for (const auto& [run, r] : records) {
      insert.addBindValue(QString::fromStdString(run));
      insert.addBindValue(QVariant::fromValue<qlonglong>(r.seq));
      insert.addBindValue(QString::fromStdString(r.node));
      insert.addBindValue(QVariant::fromValue<qlonglong>(r.rank));
      insert.addBindValue(QString::fromStdString(r.type));
      insert.addBindValue(QString::fromStdString(r.body));
      insert.exec();  // the missing run's record fails, as it did in the writer
    }
    connection_.exec("COMMIT");
  }
  Connection& connection() { return connection_; }

 private:
  Connection connection_;
};

// The store's writer: in batches split at `cuts` (each flushed), a write
// between two of them.
void store_through_writer(Store& store, const std::vector<Stored>& records,
                          const std::vector<size_t>& cuts) {
  for (size_t i = 0; i < records.size(); ++i) {
    for (size_t cut : cuts)
      if (i == cut) {
        store.flush();
        store.save_probe("local", "{}");
      }
    store.append_record(records[i].run, records[i].record);
  }
  store.flush();
}

struct Table {
  QStringList columns;
  std::vector<QVariantList> rows;
};

Table step_buckets_in(const QString& path) {
  Connection connection(path);
  QSqlQuery q = connection.exec("SELECT * FROM step_buckets ORDER BY run_id, rank, bucket");
  Table table;
  for (int c = 0; c < q.record().count(); ++c) table.columns << q.record().fieldName(c);
  while (q.next()) {
    QVariantList row;
    for (int c = 0; c < table.columns.size(); ++c) row << q.value(c);
    table.rows.push_back(row);
  }
  return table;
}

std::string text_of(const QVariant& v) {
  return v.isNull() ? "NULL" : v.toString().toStdString();
}

// Row by row, column by column: NULL where the trigger left NULL, the same
// number (bit for bit, infinities included) elsewhere.
void expect_same_buckets(const Table& trigger, const Table& writer) {
  ASSERT_EQ(trigger.columns, writer.columns);
  ASSERT_EQ(trigger.rows.size(), writer.rows.size());
  for (size_t r = 0; r < trigger.rows.size(); ++r) {
    const auto& t = trigger.rows[r];
    const auto& w = writer.rows[r];
    const std::string where = "run " + text_of(t[0]) + " rank " + text_of(t[1]) + " bucket " +
                              text_of(t[2]) + ", column ";
    EXPECT_EQ(t[0].toString(), w[0].toString()) << where << "run_id";
    for (int c = 1; c < trigger.columns.size(); ++c) {
      const std::string column = where + trigger.columns[c].toStdString();
      ASSERT_EQ(t[c].isNull(), w[c].isNull())
          << column << ": trigger " << text_of(t[c]) << ", writer " << text_of(w[c]);
      if (t[c].isNull()) continue;
      // Integers (counts, buckets up to 2^55) as integers, the rest as reals.
      const bool integers = t[c].typeId() == QMetaType::LongLong;
      EXPECT_EQ(integers, w[c].typeId() == QMetaType::LongLong) << column;
      if (integers) {
        EXPECT_EQ(t[c].toLongLong(), w[c].toLongLong()) << column;
      } else {
        EXPECT_EQ(t[c].toDouble(), w[c].toDouble())
            << column << ": trigger " << text_of(t[c]) << ", writer " << text_of(w[c]);
      }
    }
  }
}

int64_t count_of(Connection& connection, const QString& sql) {
  QSqlQuery q = connection.exec(sql);
  return q.next() ? q.value(0).toLongLong() : -1;
}

TEST(StepBuckets, TheWriterStoresExactlyWhatTheTriggerStored) {
  TempDir dir;
  int64_t seq = 0;
  auto records = ordinary_steps(seq);
  const auto odd = odd_records(seq);
  records.insert(records.begin() + 301, odd.begin(), odd.end());

  const QString by_writer = db_in(dir, "writer.db"), by_trigger = db_in(dir, "trigger.db");
  for (const QString& path : {by_writer, by_trigger}) {
    Store store(path);
    store.create_run(minimal_run("r1", 3));
    store.create_run(minimal_run("r2", 3));
  }
  {
    Store store(by_writer);
    store.add_problem_listener([](const StoreProblem&) {});  // the missing run's record
    store_through_writer(store, records, {1, 200, 302, 320, 900});
  }
  {
    TriggerPath trigger(by_trigger);
    trigger.store(records);
  }

  const Table trigger = step_buckets_in(by_trigger), writer = step_buckets_in(by_writer);
  expect_same_buckets(trigger, writer);
  // Ranks 0 and 1: buckets 0..2 each; rank 2's odd steps: buckets -2^55
  // (the lowest 64-bit step), -1, 0, 1 and 2^55 - 1 (the highest); run r2: one.
  EXPECT_EQ(trigger.rows.size(), 2u * 3u + 5u + 1u);
  {
    Connection connection(by_writer);
    EXPECT_EQ(count_of(connection, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'"), 0);
    // All but the record seen again and the one of a missing run.
    EXPECT_EQ(count_of(connection, "SELECT count(*) FROM records"), int64_t(records.size()) - 2);
  }
  // The run of three records, by hand: steps 1..3, "loss" on two of them.
  Store view(by_writer, StoreAccess::read_only);
  const auto r2 = view.step_buckets("r2");
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0].records, 3);
  const auto& loss = r2[0].fields.at("loss");
  EXPECT_EQ(loss.count, 2);
  EXPECT_EQ(loss.min, 1);
  EXPECT_EQ(loss.max, 2);
  EXPECT_EQ(loss.sum, 3);
  EXPECT_EQ(r2[0].fields.at("step").sum, 6);
  EXPECT_EQ(r2[0].fields.count("lr"), 0u);
}

// A database of the previous Flotilla (schema 6, the trigger keeping the
// buckets): the migration leaves its buckets as they are, and the records
// stored after it grow them as the trigger would have.
TEST(StepBuckets, ADatabaseOfTheTriggerKeepsItsBucketsAndTheWriterAddsToThem) {
  TempDir dir;
  int64_t seq = 0;
  auto records = ordinary_steps(seq);
  const auto odd = odd_records(seq);
  records.insert(records.end(), odd.begin(), odd.end());
  const size_t half = 601;  // within the second bucket of ranks 0 and 1
  const std::vector<Stored> before(records.begin(), records.begin() + half),
      after(records.begin() + half, records.end());

  const QString migrated = db_in(dir, "migrated.db"), twin = db_in(dir, "twin.db");
  for (const QString& path : {migrated, twin}) {
    {
      Store store(path);
      store.create_run(minimal_run("r1", 3));
      store.create_run(minimal_run("r2", 3));
    }
    TriggerPath trigger(path);
    trigger.store(before);
    if (path == migrated) {
      trigger.connection().exec("DELETE FROM applied_migrations WHERE version = 7");
      trigger.connection().exec("UPDATE schema_version SET version = 6");
    } else {
      trigger.store(after);
    }
  }
  const Table made_by_trigger = step_buckets_in(migrated);
  ASSERT_EQ(made_by_trigger.rows.size(), 4u);

  Store store(migrated);
  EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
  expect_same_buckets(made_by_trigger, step_buckets_in(migrated));
  {
    Connection connection(migrated);
    EXPECT_EQ(count_of(connection, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'"), 0);
  }
  store.add_problem_listener([](const StoreProblem&) {});
  store_through_writer(store, after, {100, 400});
  expect_same_buckets(step_buckets_in(twin), step_buckets_in(migrated));
}

}  // namespace
}  // namespace flotilla::controller
