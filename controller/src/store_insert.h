#pragma once
// The writer's INSERT of a record, through SQLite's own interface on the
// writer's connection (QSqlDriver::handle()), binding the UTF-8 the record
// came in as: QtSql would convert each text to UTF-16 and SQLite back to
// UTF-8, a third of the writer's time per record (docs/benchmarks.md). What
// is stored is unchanged: text that is not valid UTF-8 is stored as QString
// would have stored it, its bad bytes replaced.

#include <QByteArray>
#include <QString>

#include <cstdint>
#include <string>

#include "flotilla/controller/store.h"

class QSqlDatabase;
struct sqlite3;
struct sqlite3_stmt;

namespace flotilla::controller {

class RecordInsert {
 public:
  // Prepares the INSERT on `db`'s connection (open, SQLite); throws
  // StoreError naming `path` when it cannot.
  RecordInsert(QSqlDatabase& db, const QString& path);
  ~RecordInsert();
  RecordInsert(const RecordInsert&) = delete;
  RecordInsert& operator=(const RecordInsert&) = delete;

  enum class Outcome { inserted, seen_before, failed };
  // Inserts `record` of `run` unless a record of its (run, node, seq) is
  // stored (seen_before). failed: the record's own fault (no such run),
  // with SQLite's words in error(). Throws DatabaseRefused when the database
  // refuses writes as a whole.
  Outcome insert(const std::string& run, const RecordRow& record);
  const std::string& error() const { return error_; }

 private:
  void bind_text(int index, const std::string& text, QByteArray& replaced);

  const QString& path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* statement_ = nullptr;
  std::string error_;
  QByteArray replaced_[4];  // bytes bound while the statement runs
};

}  // namespace flotilla::controller
