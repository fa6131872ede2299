#include "migrations.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>

#include <map>

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
    if (ok) files[version] = ":/migrations/" + name;
  }
  return files;
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

void migrate(QSqlDatabase& db) {
  exec(db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
       "creating schema_version");
  const int current = schema_version(db);
  const int latest = latest_migration();
  if (current > latest)
    throw StoreError("the database has schema version " + std::to_string(current) +
                     ", newer than this Flotilla's " + std::to_string(latest) +
                     "; use a newer Flotilla or another --db");
  for (const auto& [version, file_name] : migration_files()) {
    if (version <= current) continue;
    QFile file(file_name);
    if (!file.open(QIODevice::ReadOnly))
      throw StoreError("cannot read migration " + file_name.toStdString());
    const QString what = "migration " + QFileInfo(file_name).fileName();
    exec(db, "BEGIN IMMEDIATE", what);
    try {
      for (const QString& statement : statements_of(QString::fromUtf8(file.readAll())))
        exec(db, statement, what);
      exec(db, "DELETE FROM schema_version", what);
      exec(db, "INSERT INTO schema_version (version) VALUES (" + QString::number(version) + ")",
           what);
      exec(db, "COMMIT", what);
    } catch (...) {
      QSqlQuery(db).exec("ROLLBACK");
      throw;
    }
  }
}

}  // namespace flotilla::controller
