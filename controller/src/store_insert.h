#pragma once
// The writer's INSERT of a record. Where Qt's SQLite driver calls the very
// libsqlite3 this program links (Debian's Qt does), through SQLite's own
// interface on the writer's connection (QSqlDriver::handle()), binding the
// UTF-8 the record came in as: QtSql would convert each text to UTF-16 and
// SQLite back to UTF-8, a third of the writer's time per record
// (docs/benchmarks.md). Where the driver brings its own SQLite (a Qt built
// with its bundled copy), that handle belongs to another library and only
// QtSql may use it: the INSERT is then bound through QtSql. What is stored is
// the same either way: text that is not valid UTF-8 is stored as QString
// would have stored it, its bad bytes replaced.

#include <QByteArray>
#include <QSqlQuery>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>

#include "flotilla/controller/store.h"

class QSqlDatabase;
struct sqlite3;
struct sqlite3_stmt;

namespace flotilla::controller {

// Whether the SQLite driver behind `db` (open) resolves SQLite's functions
// to the same library this program calls, so that its handle may be used
// here. False where that cannot be shown.
bool driver_shares_our_sqlite(const QSqlDatabase& db);

class RecordInsert {
 public:
  // How a record's values are bound: `fastest` is SQLite's own interface
  // where the driver shares our SQLite and QtSql otherwise; `qt` is QtSql
  // always (its tests and the ingest bench's comparison).
  enum class Binding { fastest, qt };

  // Prepares the INSERT on `db`'s connection (open, SQLite); throws
  // StoreError naming `path` when it cannot.
  RecordInsert(QSqlDatabase& db, const QString& path, Binding binding = Binding::fastest);
  ~RecordInsert();
  RecordInsert(const RecordInsert&) = delete;
  RecordInsert& operator=(const RecordInsert&) = delete;

  // Whether records are bound through SQLite's own interface.
  bool binds_directly() const { return statement_ != nullptr; }

  enum class Outcome { inserted, seen_before, failed };
  // Inserts `record` of `run` unless a record of its (run, node, seq) is
  // stored (seen_before). failed: the record's own fault (no such run),
  // with SQLite's words in error(). Throws DatabaseRefused when the database
  // refuses writes as a whole.
  Outcome insert(const std::string& run, const RecordRow& record);
  const std::string& error() const { return error_; }

 private:
  Outcome insert_directly(const std::string& run, const RecordRow& record);
  Outcome insert_through_qt(const std::string& run, const RecordRow& record);
  void bind_text(int index, const std::string& text, QByteArray& replaced);

  const QString& path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* statement_ = nullptr;
  std::optional<QSqlQuery> qt_statement_;
  std::string error_;
  QByteArray replaced_[4];  // bytes bound while the statement runs
};

}  // namespace flotilla::controller
