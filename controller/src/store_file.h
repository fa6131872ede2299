#pragma once
// A look at the database file before SQLite opens it: a file that is not a
// SQLite database, or is shorter than its own header says, is refused before
// anything could write to it (SQLite takes a one-byte file for an empty
// database and writes a new one over it, and reads a file cut inside its last
// page without a word).

#include <QString>

#include <memory>
#include <string>

namespace flotilla::controller {

// Throws StoreError naming the file and what is wrong with it. A missing or
// empty file passes: either is a new database.
void check_database_file(const QString& path);

// check_database_file for a Store about to open `path`, unless another Store
// of this process has the file open: then it was checked when that one
// opened, and it must not be opened again outside SQLite. POSIX locks belong
// to the process, and closing any descriptor of a file drops all of them,
// those of SQLite's open connections included; another program (a `sqlite3`
// shell) then took itself for the file's only user, checkpointed and deleted
// the write-ahead log under this process's connections, and their next read
// failed with "disk I/O error" (SQLite: "How To Corrupt An SQLite Database
// File", 2.2). The claim lasts as long as the returned handle.
std::shared_ptr<void> claim_database_file(const QString& path);

// `error` (SQLite's refusal to open the file) with what to do added when
// SQLite found the file damaged or not a database at all.
std::string with_damage_advice(const std::string& error);

}  // namespace flotilla::controller
