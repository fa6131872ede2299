#include "store_insert.h"

#include <QByteArrayView>
#include <QSqlDatabase>
#include <QSqlDriver>
#include <QSqlError>
#include <QVariant>

#include <atomic>

#include <dlfcn.h>
#include <sqlite3.h>

#include "sql_query.h"

namespace flotilla::controller {
namespace {

constexpr const char* kInsertSql =
    "INSERT OR IGNORE INTO records (run_id, seq, node, rank, type, body) "
    "VALUES (?, ?, ?, ?, ?, ?)";

}  // namespace

// The driver is an object of Qt's SQLite plugin: the library its virtual
// table lies in is that plugin. Looked up from the plugin, sqlite3_step is
// the plugin's own copy where it bundles SQLite, nothing where that copy is
// hidden, and the system library's where it links that; looked up as this
// program's calls are (the global scope), it is the one we call. The
// writer asks at every commit: a driver class found sharing it is
// remembered, so the lookups are made once.
bool driver_shares_our_sqlite(const QSqlDatabase& db) {
  static std::atomic<const void*> shared_vtable{nullptr};
  const QSqlDriver* driver = db.driver();
  if (!driver) return false;
  const void* vtable = *reinterpret_cast<void* const*>(driver);
  if (vtable == shared_vtable.load()) return true;
  Dl_info plugin_info{};
  if (dladdr(vtable, &plugin_info) == 0 || !plugin_info.dli_fname) return false;
  void* plugin = dlopen(plugin_info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!plugin) return false;
  const void* theirs = dlsym(plugin, "sqlite3_step");
  dlclose(plugin);
  const void* ours = dlsym(RTLD_DEFAULT, "sqlite3_step");
  if (!theirs || theirs != ours) return false;
  shared_vtable = vtable;
  return true;
}

RecordInsert::RecordInsert(QSqlDatabase& db, const QString& path, Binding binding) : path_(path) {
  const QVariant handle = db.driver() ? db.driver()->handle() : QVariant();
  if (!handle.isValid() || qstrcmp(handle.typeName(), "sqlite3*") != 0)
    throw StoreError("database " + path_.toStdString() + ": the writer's connection is not SQLite");
  if (binding == Binding::qt || !driver_shares_our_sqlite(db)) {
    qt_statement_.emplace(db);
    if (!qt_statement_->prepare(kInsertSql)) {
      const QSqlError error = qt_statement_->lastError();
      const std::string message = "database " + path_.toStdString() +
                                  ": preparing the records' INSERT: " + error.text().toStdString();
      if (refuses_writes(error)) throw DatabaseRefused(message);
      throw StoreError(message);
    }
    return;
  }
  db_ = *static_cast<sqlite3* const*>(handle.constData());
  if (!db_)
    throw StoreError("database " + path_.toStdString() + ": the writer's connection is closed");
  if (const int rc = sqlite3_prepare_v2(db_, kInsertSql, -1, &statement_, nullptr);
      rc != SQLITE_OK) {
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

RecordInsert::Outcome RecordInsert::insert(const std::string& run, const RecordRow& record) {
  return statement_ ? insert_directly(run, record) : insert_through_qt(run, record);
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

RecordInsert::Outcome RecordInsert::insert_directly(const std::string& run,
                                                    const RecordRow& record) {
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

RecordInsert::Outcome RecordInsert::insert_through_qt(const std::string& run,
                                                      const RecordRow& record) {
  QSqlQuery& insert = *qt_statement_;
  insert.addBindValue(QString::fromStdString(run));
  insert.addBindValue(QVariant::fromValue<qlonglong>(record.seq));
  insert.addBindValue(QString::fromStdString(record.node));
  insert.addBindValue(QVariant::fromValue<qlonglong>(record.rank));
  insert.addBindValue(QString::fromStdString(record.type));
  insert.addBindValue(QString::fromStdString(record.body));
  if (insert.exec())
    return insert.numRowsAffected() == 1 ? Outcome::inserted : Outcome::seen_before;
  const QSqlError error = insert.lastError();
  error_ = error.text().toStdString();
  if (refuses_writes(error))
    throw DatabaseRefused("database " + path_.toStdString() + ": " + error_);
  return Outcome::failed;
}

}  // namespace flotilla::controller
