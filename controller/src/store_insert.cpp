#include "store_insert.h"

#include <QByteArrayView>
#include <QSqlDatabase>
#include <QSqlDriver>
#include <QVariant>

#include <sqlite3.h>

#include "sql_query.h"

namespace flotilla::controller {

RecordInsert::RecordInsert(QSqlDatabase& db, const QString& path) : path_(path) {
  const QVariant handle = db.driver() ? db.driver()->handle() : QVariant();
  if (!handle.isValid() || qstrcmp(handle.typeName(), "sqlite3*") != 0)
    throw StoreError("database " + path_.toStdString() + ": the writer's connection is not SQLite");
  db_ = *static_cast<sqlite3* const*>(handle.constData());
  if (!db_)
    throw StoreError("database " + path_.toStdString() + ": the writer's connection is closed");
  const char* sql =
      "INSERT OR IGNORE INTO records (run_id, seq, node, rank, type, body) "
      "VALUES (?, ?, ?, ?, ?, ?)";
  if (const int rc = sqlite3_prepare_v2(db_, sql, -1, &statement_, nullptr); rc != SQLITE_OK) {
    const std::string message = "database " + path_.toStdString() +
                                ": preparing the records' INSERT: " + sqlite3_errmsg(db_);
    sqlite3_finalize(statement_);
    statement_ = nullptr;
    if (refuses_writes(rc)) throw DatabaseRefused(message);
    throw StoreError(message);
  }
}

RecordInsert::~RecordInsert() {
  sqlite3_finalize(statement_);
}

// Valid UTF-8 is bound as it is (SQLite keeps the pointer until the reset);
// anything else as QString's decoding makes it, which is what QtSql stored.
void RecordInsert::bind_text(int index, const std::string& text, QByteArray& replaced) {
  const QByteArrayView bytes(text.data(), qsizetype(text.size()));
  if (bytes.isValidUtf8() && !bytes.startsWith("\xEF\xBB\xBF")) {
    sqlite3_bind_text(statement_, index, text.data(), int(text.size()), SQLITE_STATIC);
    return;
  }
  replaced = QString::fromStdString(text).toUtf8();
  sqlite3_bind_text(statement_, index, replaced.constData(), int(replaced.size()), SQLITE_STATIC);
}

RecordInsert::Outcome RecordInsert::insert(const std::string& run, const RecordRow& record) {
  bind_text(1, run, replaced_[0]);
  sqlite3_bind_int64(statement_, 2, record.seq);
  bind_text(3, record.node, replaced_[1]);
  sqlite3_bind_int64(statement_, 4, record.rank);
  bind_text(5, record.type, replaced_[2]);
  bind_text(6, record.body, replaced_[3]);
  const int rc = sqlite3_step(statement_);
  Outcome outcome = Outcome::inserted;
  if (rc == SQLITE_DONE) {
    if (sqlite3_changes(db_) == 0) outcome = Outcome::seen_before;
  } else {
    // The statement's own code, not the reset's (which repeats it).
    const int code = sqlite3_extended_errcode(db_);
    error_ = sqlite3_errmsg(db_);
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
    if (refuses_writes(code))
      throw DatabaseRefused("database " + path_.toStdString() + ": " + error_);
    return Outcome::failed;
  }
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
  return outcome;
}

}  // namespace flotilla::controller
