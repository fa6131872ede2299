#include "migrations.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>

#include <map>
#include <set>
#include <vector>

#include "flotilla/controller/store.h"

// Outside any namespace, as Q_INIT_RESOURCE requires.
static void init_migration_resources() {
  Q_INIT_RESOURCE(migrations);
}

namespace flotilla::controller {
namespace {

std::map<int, QString> migration_files() {
  init_migration_resources();
  std::map<int, QString> files;
  for (const QString& name : QDir(":/migrations").entryList({"*.sql"}, QDir::Files)) {
    bool ok = false;
    const int version = name.section('_', 0, 0).toInt(&ok);
    if (!ok) continue;
    // Two branches that each took the next number would otherwise lose one.
    if (const auto other = files.find(version); other != files.end())
      throw StoreError("two migrations are numbered " + std::to_string(version) + ": " +
                       QFileInfo(other->second).fileName().toStdString() + " and " +
                       name.toStdString());
    files[version] = ":/migrations/" + name;
  }
  return files;
}

QString script_of(const QString& file_name) {
  QFile file(file_name);
  if (!file.open(QIODevice::ReadOnly))
    throw StoreError("cannot read migration " + file_name.toStdString());
  return QString::fromUtf8(file.readAll());
}

bool has_table(QSqlDatabase& db, const QString& table) {
  QSqlQuery query(db);
  query.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  query.addBindValue(table);
  return query.exec() && query.next();
}

// The tables a migration creates (no migration drops a table).
QStringList tables_created_by(const QString& script) {
  static const QRegularExpression create(R"(CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+))",
                                         QRegularExpression::CaseInsensitiveOption);
  QStringList tables;
  for (auto it = create.globalMatch(script); it.hasNext();) tables << it.next().captured(1);
  return tables;
}

void exec(QSqlDatabase& db, const QString& sql, const QString& what) {
  QSqlQuery query(db);
  if (!query.exec(sql))
    throw StoreError(what.toStdString() + ": " + query.lastError().text().toStdString());
}

// Statements end with ';' at the end of a line; lines starting with -- are comments.
QStringList statements_of(const QString& script) {
  QStringList statements;
  QString current;
  for (const QString& line : script.split('\n')) {
    if (line.trimmed().startsWith("--")) continue;
    current += line + '\n';
    if (line.trimmed().endsWith(';')) {
      statements << current.trimmed();
      current.clear();
    }
  }
  if (!current.trimmed().isEmpty()) statements << current.trimmed();
  return statements;
}

}  // namespace

int latest_migration() {
  const auto files = migration_files();
  return files.empty() ? 0 : files.rbegin()->first;
}

int schema_version(QSqlDatabase& db) {
  QSqlQuery query(db);
  if (!query.exec("SELECT version FROM schema_version") || !query.next()) return 0;
  return query.value(0).toInt();
}

std::set<int> applied_migrations(QSqlDatabase& db) {
  std::set<int> applied;
  if (has_table(db, "applied_migrations")) {
    QSqlQuery query(db);
    if (!query.exec("SELECT version FROM applied_migrations"))
      throw StoreError("reading applied_migrations: " + query.lastError().text().toStdString());
    while (query.next()) applied.insert(query.value(0).toInt());
    return applied;
  }
  // A database from before applied_migrations kept only the highest version
  // it reached. Migration 0004 was numbered after 0005 and 0006 existed, so a
  // database at 6 may lack it: a migration up to that version counts as
  // applied only when every table it creates is there.
  const int reached = schema_version(db);
  for (const auto& [version, file_name] : migration_files()) {
    if (version > reached) continue;
    bool present = true;
    for (const QString& table : tables_created_by(script_of(file_name)))
      present = present && has_table(db, table);
    if (present) applied.insert(version);
  }
  return applied;
}

std::vector<QString> missing_migrations(QSqlDatabase& db) {
  const auto applied = applied_migrations(db);
  std::vector<QString> missing;
  for (const auto& [version, file_name] : migration_files())
    if (!applied.count(version)) missing.push_back(QFileInfo(file_name).fileName());
  return missing;
}

void migrate(QSqlDatabase& db) {
  exec(db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
       "creating schema_version");
  const int current = schema_version(db);
  const int latest = latest_migration();
  if (current > latest)
    throw StoreError("the database has schema version " + std::to_string(current) +
                     ", newer than this Flotilla's " + std::to_string(latest) +
                     "; use a newer Flotilla or another --db");
  // Another process (the window and the CLI opening a new database together)
  // may be migrating the same file: what is applied is read again inside each
  // write transaction, which SQLite lets one connection hold at a time, and
  // what the other did meanwhile is skipped rather than done twice.
  auto applied = applied_migrations(db);
  if (!has_table(db, "applied_migrations")) {
    const QString what = "recording the applied migrations";
    exec(db, "BEGIN IMMEDIATE", what);
    try {
      if (!has_table(db, "applied_migrations")) {
        applied = applied_migrations(db);
        exec(db, "CREATE TABLE applied_migrations (version INTEGER PRIMARY KEY)", what);
        for (const int version : applied)
          exec(db,
               "INSERT INTO applied_migrations (version) VALUES (" + QString::number(version) + ")",
               what);
      }
      exec(db, "COMMIT", what);
    } catch (...) {
      QSqlQuery(db).exec("ROLLBACK");
      throw;
    }
  }
  // Every migration not applied yet, in number order, whatever the version reached.
  for (const auto& [version, file_name] : migration_files()) {
    if (applied.count(version)) continue;
    const QString what = "migration " + QFileInfo(file_name).fileName();
    const QString script = script_of(file_name);
    exec(db, "BEGIN IMMEDIATE", what);
    try {
      if (applied_migrations(db).count(version)) {  // by another process meanwhile
        exec(db, "COMMIT", what);
        applied.insert(version);
        continue;
      }
      for (const QString& statement : statements_of(script)) exec(db, statement, what);
      // A migration that edits the schema's text in place: every connection
      // (this one, the store's readers, another process's) reads it again
      // once schema_version moves.
      if (script.contains("writable_schema", Qt::CaseInsensitive)) {
        QSqlQuery version(db);
        if (!version.exec("PRAGMA schema_version") || !version.next())
          throw StoreError(what.toStdString() +
                           ": reading schema_version: " + version.lastError().text().toStdString());
        exec(db, "PRAGMA schema_version = " + QString::number(version.value(0).toLongLong() + 1),
             what);
      }
      exec(db, "INSERT INTO applied_migrations (version) VALUES (" + QString::number(version) + ")",
           what);
      applied.insert(version);
      exec(db, "DELETE FROM schema_version", what);
      exec(db,
           "INSERT INTO schema_version (version) VALUES (" + QString::number(*applied.rbegin()) +
               ")",
           what);
      exec(db, "COMMIT", what);
    } catch (...) {
      QSqlQuery(db).exec("ROLLBACK");
      throw;
    }
  }
}

}  // namespace flotilla::controller
