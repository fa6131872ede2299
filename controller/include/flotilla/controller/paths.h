#pragma once
// Where the controller's files and sibling programs are.

#include <QString>

#include <filesystem>

namespace flotilla::controller {

// The database when no --db is given: flotilla/flotilla.db in the user's data
// directory (XDG_DATA_HOME, usually ~/.local/share), shared by CLI and GUI.
QString default_database_path();
// A program installed next to the running one, as bin/ and a node's bundle
// hold them. Needs the QCoreApplication that every controller program has.
std::filesystem::path sibling_program(const std::string& name);

}  // namespace flotilla::controller
