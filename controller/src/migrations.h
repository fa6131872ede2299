#pragma once
// Schema migrations: resources/migrations/NNNN_name.sql, compiled in as Qt
// resources, applied in order, each in its own transaction, with the reached
// version stored in schema_version.

#include <QString>

class QSqlDatabase;

namespace flotilla::controller {

int latest_migration();
// Brings the database up to latest_migration(); throws StoreError naming the
// migration that failed. A database newer than this program is refused.
void migrate(QSqlDatabase& db);
int schema_version(QSqlDatabase& db);

}  // namespace flotilla::controller
