#pragma once
// One prepared statement at a time on a connection, failing loudly: a
// StoreError naming the database, SQLite's words and the statement.

#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QString>
#include <QVariant>

#include "flotilla/controller/store.h"

namespace flotilla::controller {

class SqlQuery {
 public:
  SqlQuery(QSqlDatabase& db, const QString& path) : query_(db), path_(path) {}
  SqlQuery& run(const QString& sql, const QVariantList& binds = {}) {
    bool ok = query_.prepare(sql);
    for (const auto& b : binds) query_.addBindValue(b);
    ok = ok && query_.exec();
    if (!ok)
      throw StoreError("database " + path_.toStdString() + ": " +
                       query_.lastError().text().toStdString() +
                       " (in: " + sql.simplified().left(80).toStdString() + ")");
    return *this;
  }
  bool next() { return query_.next(); }
  QVariant at(int i) const { return query_.value(i); }
  // Rows the last UPDATE, INSERT or DELETE changed.
  int changed() const { return query_.numRowsAffected(); }

 private:
  QSqlQuery query_;
  const QString& path_;
};

}  // namespace flotilla::controller
