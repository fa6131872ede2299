#pragma once
// A `sqlite3` shell, a process of its own, holding a database's write lock
// (BEGIN EXCLUSIVE) from construction until commit() or its end: the
// "another program has the database open" fault, as a person makes it.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace flotilla::testing {

class SqliteLockHolder {
 public:
  SqliteLockHolder(const std::string& db, const std::filesystem::path& output) : output_(output) {
    const std::string command = "sqlite3 -batch '" + db + "' > '" + output.string() + "' 2>&1";
    shell_ = ::popen(command.c_str(), "w");
    if (!shell_) throw std::runtime_error("cannot start sqlite3: " + std::string(strerror(errno)));
    say("PRAGMA busy_timeout = 20000;\nBEGIN EXCLUSIVE;\n.print lock-held\n");
  }
  ~SqliteLockHolder() {
    if (shell_) {
      say(".quit\n");
      ::pclose(shell_);
    }
  }
  SqliteLockHolder(const SqliteLockHolder&) = delete;
  SqliteLockHolder& operator=(const SqliteLockHolder&) = delete;

  // Whether the shell has the lock (it printed its mark), and what it said.
  bool holds() const { return output().find("lock-held") != std::string::npos; }
  std::string output() const {
    std::ifstream in(output_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // Ends the transaction and the shell: the lock is free when this returns.
  void commit() {
    say("COMMIT;\n.quit\n");
    ::pclose(shell_);
    shell_ = nullptr;
  }

 private:
  void say(const std::string& text) {
    std::fputs(text.c_str(), shell_);
    std::fflush(shell_);
  }
  std::FILE* shell_ = nullptr;
  std::filesystem::path output_;
};

}  // namespace flotilla::testing
