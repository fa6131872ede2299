#pragma once
// A look at the database file before SQLite opens it: a file that is not a
// SQLite database, or is shorter than its own header says, is refused before
// anything could write to it (SQLite takes a one-byte file for an empty
// database and writes a new one over it, and reads a file cut inside its last
// page without a word).

#include <QString>

#include <string>

namespace flotilla::controller {

// Throws StoreError naming the file and what is wrong with it. A missing or
// empty file passes: either is a new database.
void check_database_file(const QString& path);

// `error` (SQLite's refusal to open the file) with what to do added when
// SQLite found the file damaged or not a database at all.
std::string with_damage_advice(const std::string& error);

}  // namespace flotilla::controller
