#include "temp_dir.h"

#include <stdlib.h>

#include <fstream>
#include <stdexcept>

namespace flotilla::testing {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "flotilla-test-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp " + pattern + " failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path TempDir::write(const std::string& name, const std::string& text) const {
  std::ofstream(path_ / name) << text;
  return path_ / name;
}

}  // namespace flotilla::testing
