#pragma once
// One prepared statement at a time on a connection, failing loudly: a
// StoreError naming the database, SQLite's words and the statement; a
// DatabaseRefused when the database refuses writes as a whole rather than
// this one statement.

#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QSqlRecord>
#include <QString>
#include <QVariant>

#include <chrono>
#include <string>

#include "flotilla/controller/store.h"

namespace flotilla::controller {

// The database takes no write for now: locked by another connection past the
// busy timeout, read-only, out of disk, failing I/O. The writer keeps what it
// was given and tries again; any other failure is the statement's own.
class DatabaseRefused : public StoreError {
 public:
  using StoreError::StoreError;
};

// Between the store's std::string and Qt's SQL types.
inline QString qs(const std::string& s) {
  return QString::fromStdString(s);
}
inline std::string ss(const QVariant& v) {
  return v.toString().toStdString();
}

// Whether SQLite's result `code` (primary or extended) says the database
// refuses writes as a whole.
inline bool refuses_writes(int code) {
  switch (code & 0xff) {
    case 5:   // SQLITE_BUSY
    case 6:   // SQLITE_LOCKED
    case 7:   // SQLITE_NOMEM
    case 8:   // SQLITE_READONLY
    case 10:  // SQLITE_IOERR
    case 13:  // SQLITE_FULL
    case 14:  // SQLITE_CANTOPEN
    case 15:  // SQLITE_PROTOCOL
      return true;
    default:
      return false;
  }
}

inline bool refuses_writes(const QSqlError& error) {
  bool ok = false;
  const int code = error.nativeErrorCode().toInt(&ok);
  return ok && refuses_writes(code);
}

class SqlQuery {
 public:
  SqlQuery(QSqlDatabase& db, const QString& path) : query_(db), path_(path) {}
  SqlQuery& run(const QString& sql, const QVariantList& binds = {}) {
    bool ok = query_.prepare(sql);
    for (const auto& b : binds) query_.addBindValue(b);
    ok = ok && query_.exec();
    if (!ok) {
      const std::string message = "database " + path_.toStdString() + ": " +
                                  query_.lastError().text().toStdString() +
                                  " (in: " + sql.simplified().left(80).toStdString() + ")";
      if (refuses_writes(query_.lastError())) throw DatabaseRefused(message);
      throw StoreError(message);
    }
    return *this;
  }
  bool next() { return query_.next(); }
  QSqlRecord record() const { return query_.record(); }
  QVariant at(int i) const { return query_.value(i); }
  // Rows the last UPDATE, INSERT or DELETE changed.
  int changed() const { return query_.numRowsAffected(); }

 private:
  QSqlQuery query_;
  const QString& path_;
};

inline void open_connection(QSqlDatabase& db, const QString& path, bool read_only,
                            std::chrono::milliseconds busy_timeout) {
  db.setDatabaseName(path);
  const QString busy = QString("QSQLITE_BUSY_TIMEOUT=%1").arg(busy_timeout.count());
  db.setConnectOptions(read_only ? busy + ";QSQLITE_OPEN_READONLY" : busy);
  if (!db.open())
    throw StoreError("cannot open database " + path.toStdString() + ": " +
                     db.lastError().text().toStdString());
}

}  // namespace flotilla::controller
