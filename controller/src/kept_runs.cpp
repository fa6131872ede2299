#include "flotilla/controller/kept_runs.h"

#include <QSqlDatabase>
#include <QUuid>

#include <chrono>

#include "flotilla/controller/store.h"
#include "sql_query.h"

namespace flotilla::controller {
namespace {

namespace fs = std::filesystem;

void remove_database(const fs::path& file) {
  std::error_code error;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(file.string() + suffix, error);
}

void copy_into(QSqlDatabase& db, const QString& path, const Store& store,
               const std::vector<std::string>& run_ids, std::optional<int64_t> sweep_id) {
  SqlQuery q(db, path);
  q.run("ATTACH DATABASE ? AS source", {store.path()});
  q.run("CREATE TEMP TABLE kept (id TEXT PRIMARY KEY)");
  if (!db.transaction())
    throw StoreError("database " + path.toStdString() + ": cannot begin the copy");
  for (const auto& run : run_ids)
    q.run("INSERT OR IGNORE INTO kept VALUES (?)", {QString::fromStdString(run)});
  q.run("INSERT OR IGNORE INTO kept SELECT run_id FROM source.link_benches");
  q.run(
      "INSERT INTO main.experiments SELECT * FROM source.experiments WHERE id IN "
      "(SELECT experiment_id FROM source.runs WHERE id IN (SELECT id FROM kept))");
  // The same migrations made both files: their tables have the same columns
  // in the same order.
  for (const char* table : {"runs", "run_transitions", "run_nodes", "records", "step_buckets",
                            "link_benches", "run_predictions"})
    q.run(QString("INSERT INTO main.%1 SELECT * FROM source.%1 WHERE %2 IN (SELECT id FROM kept)")
              .arg(table, QString(table) == "runs" ? "id" : "run_id"));
  if (sweep_id) {
    const QVariant id = qint64(*sweep_id);
    q.run("INSERT INTO main.sweeps SELECT * FROM source.sweeps WHERE id = ?", {id});
    q.run("INSERT INTO main.sweep_points SELECT * FROM source.sweep_points WHERE sweep_id = ?",
          {id});
    // Which controller ran it, and where on which machine its file lay,
    // belong to the database it ran in.
    q.run("SELECT source FROM main.sweeps WHERE id = ?", {id});
    const std::string source = q.next() ? q.at(0).toString().toStdString() : std::string();
    q.run("UPDATE main.sweeps SET owner = '', owner_seen_ms = NULL, source = ? WHERE id = ?",
          {QString::fromStdString(fs::path(source).filename().string()), id});
  }
  if (!db.commit())
    throw StoreError("database " + path.toStdString() +
                     ": cannot commit the copy: " + db.lastError().text().toStdString());
  q.run("DETACH DATABASE source");
}

}  // namespace

void keep_runs(Store& store, const std::vector<std::string>& run_ids,
               std::optional<int64_t> sweep_id, const fs::path& target) {
  // Kept into the file it reads (`flotilla --db study.db study report ... -o .`
  // beside a kept study): that file is the copy already, and removing the
  // target first would delete it.
  std::error_code same_error;
  if (fs::equivalent(target, fs::path(store.path().toStdString()), same_error)) return;
  store.flush();  // every record given so far is in the file copied from
  const QString path = QString::fromStdString(target.string());
  remove_database(target);
  { Store created(path); }  // the schema, by the same migrations as `store`'s
  const QString name = "kept-runs-" + QUuid::createUuid().toString(QUuid::WithoutBraces);
  try {
    {
      QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", name);
      open_connection(db, path, false, std::chrono::seconds(30));
      copy_into(db, path, store, run_ids, sweep_id);
      db.close();
    }
    QSqlDatabase::removeDatabase(name);
  } catch (...) {
    QSqlDatabase::database(name, false).close();
    QSqlDatabase::removeDatabase(name);
    remove_database(target);  // half a copy is no copy
    throw;
  }
}

}  // namespace flotilla::controller
