#pragma once
// Schema migrations: resources/migrations/NNNN_name.sql, compiled in as Qt
// resources, each applied once in its own transaction. applied_migrations
// lists every one applied, so that one numbered below the highest (0004,
// written after 0006) is still applied; schema_version keeps the highest, as
// older Flotillas read it.

#include <QString>

#include <set>
#include <vector>

class QSqlDatabase;

namespace flotilla::controller {

int latest_migration();
// Brings the database up to latest_migration(); throws StoreError naming the
// migration that failed. A database newer than this program is refused.
void migrate(QSqlDatabase& db);
int schema_version(QSqlDatabase& db);
// The versions applied (read only: a database from before applied_migrations
// is judged by its schema_version and the tables each migration creates).
std::set<int> applied_migrations(QSqlDatabase& db);
// The file names of the migrations not applied yet, in order; reads only.
std::vector<QString> missing_migrations(QSqlDatabase& db);

}  // namespace flotilla::controller
