#pragma once
// Runs a Flotilla program as a child process and reads back its records.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace flotilla::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

struct ProcessResult {
  int exit_code = -1;
  std::string stderr_text;
};

// Runs flotilla-train on `config_text` with records into `records`. `prefix`
// goes before the command in the shell (ulimit, environment).
ProcessResult run_train(const TempDir& dir, const std::string& config_text,
                        const std::filesystem::path& records, const std::string& prefix = "");

std::vector<nlohmann::json> read_records(const std::filesystem::path& file);
std::vector<nlohmann::json> of_type(const std::vector<nlohmann::json>& records,
                                    const std::string& type);

// CIFAR binary files in `dir`: `per_file` records per training file.
void write_cifar10(const std::filesystem::path& dir, int per_file, int test);
void write_cifar100(const std::filesystem::path& dir, int train, int test);

}  // namespace flotilla::testing
