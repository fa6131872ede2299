#pragma once
// The programs a node runs (flotilla-agent, flotilla-train), identified by a
// hash of their contents, and the shared libraries they load on this machine,
// from which a node is sent the ones it lacks.

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace flotilla::controller {

class AgentBundle {
 public:
  // flotilla-agent at `agent_binary` and the flotilla-train beside it; throws
  // std::runtime_error naming a program that is missing.
  static AgentBundle beside(const std::filesystem::path& agent_binary);

  struct Program {
    std::string name;
    std::filesystem::path path;
    std::string sha256;  // hex SHA-256 of its contents
  };
  const std::vector<Program>& programs() const { return programs_; }
  // The programs' hashes as `sha256sum --check` reads them, one
  // "<hex>  <name>" line each: what a node's copy must match before it runs.
  std::string checksums() const;
  // Hex SHA-256 of the programs' names and contents (16 digits): a node keeps
  // a bundle under it, so the same build is never sent twice.
  const std::string& hash() const { return hash_; }
  // Where this machine loads `soname` from for the programs (ldd), if it does.
  std::optional<std::filesystem::path> library(const std::string& soname) const;

 private:
  std::vector<Program> programs_;
  std::string hash_;
  mutable std::optional<std::map<std::string, std::filesystem::path>> libraries_;
};

// Hex SHA-256 of a file's contents; throws std::runtime_error naming it.
std::string file_sha256(const std::filesystem::path& file);

// The sonames an `ldd` listing says are "not found".
std::vector<std::string> missing_libraries(const std::string& ldd_output);

}  // namespace flotilla::controller
