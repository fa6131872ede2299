// The fuzz targets as ordinary programs, for builds without libFuzzer: each
// argument is a file or a folder of files (a corpus), every file is passed to
// LLVMFuzzerTestOneInput once. A crash, an abort or an uncaught exception
// fails the run, as it would under the fuzzer.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

void replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::cout << file.string() << " (" << bytes.size() << " bytes)" << std::endl;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " FILE_OR_CORPUS_DIR...\n";
    return 2;
  }
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path path = argv[i];
    if (!fs::exists(path)) {
      std::cerr << path.string() << ": no such file or folder\n";
      return 2;
    }
    if (!fs::is_directory(path)) {
      replay(path);
      ++count;
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());  // the same order every run
    for (const auto& file : files) replay(file);
    count += files.size();
  }
  if (count == 0) {
    std::cerr << "no inputs: an empty corpus tests nothing\n";
    return 1;
  }
  std::cout << count << " input(s) replayed\n";
  return 0;
}
