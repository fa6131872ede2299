#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla {
namespace {

bool is_idx(DatasetKind d) {
  return d == DatasetKind::fashion_mnist || d == DatasetKind::mnist;
}

// The file an IDX name stands for: NAME, or NAME.gz as distributed.
std::filesystem::path idx_file(const std::filesystem::path& name) {
  std::error_code ec;
  if (std::filesystem::exists(name, ec)) return name;
  return name.string() + ".gz";
}

// What a file holds, read from its first bytes and its size only: the
// engine reads each file through zlib, which passes files that are not
// gzipped through unchanged, so a file is checked as what it really is.
struct FileContents {
  std::string unreadable;  // why it cannot be read; empty when it can
  uint64_t bytes = 0;      // of the data (uncompressed; for gzip modulo 2^32)
  bool gzipped = false;
  std::vector<uint8_t> head;  // the data's first bytes (uncompressed)
};

FileContents inspect(const std::filesystem::path& file, size_t head_bytes) {
  FileContents contents;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    contents.unreadable = std::strerror(errno);
    return contents;
  }
  std::array<unsigned char, 2> magic{};
  in.read(reinterpret_cast<char*>(magic.data()), 2);
  in.clear();
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  contents.gzipped = size >= 18 && magic[0] == 0x1f && magic[1] == 0x8b;
  contents.bytes = size;
  if (contents.gzipped) {
    // gzip's trailer ends with the uncompressed length modulo 2^32 (ISIZE),
    // little-endian: the length without decompressing the file.
    std::array<unsigned char, 4> isize{};
    in.seekg(-4, std::ios::end);
    in.read(reinterpret_cast<char*>(isize.data()), 4);
    contents.bytes = uint64_t{isize[0]} | uint64_t{isize[1]} << 8 | uint64_t{isize[2]} << 16 |
                     uint64_t{isize[3]} << 24;
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> gz(gzopen(file.c_str(), "rb"), gzclose);
  if (!gz) {
    contents.unreadable = "cannot be opened";
    return contents;
  }
  contents.head.resize(head_bytes);
  const int n = gzread(gz.get(), contents.head.data(), static_cast<unsigned>(head_bytes));
  if (n < 0) {
    contents.unreadable = "corrupt gzip data";
    return contents;
  }
  contents.head.resize(static_cast<size_t>(n));
  return contents;
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// An IDX file of unsigned bytes whose header and length agree: its items
// (the first dimension), or why not.
std::optional<uint32_t> idx_items(const FileContents& contents, std::string& why) {
  const auto& head = contents.head;
  if (head.size() < 4 || head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] == 0 ||
      head[3] > 4) {
    why = "is not an IDX file of unsigned bytes";
    return std::nullopt;
  }
  const size_t dims = head[3];
  const size_t offset = 4 + 4 * dims;
  if (head.size() < offset) {
    why = "has a truncated IDX header";
    return std::nullopt;
  }
  uint64_t count = 1;
  for (size_t d = 0; d < dims; ++d) count *= big_endian(&head[4 + 4 * d]);
  const uint64_t expected = offset + count;
  const uint64_t actual = contents.bytes;
  const bool agrees = contents.gzipped ? (expected & 0xffffffffu) == actual : expected == actual;
  if (!agrees) {
    why = "holds " + std::to_string(actual) + " bytes" + (contents.gzipped ? " uncompressed" : "") +
          ", its IDX header promises " + std::to_string(expected);
    return std::nullopt;
  }
  return big_endian(&head[4]);
}

}  // namespace

std::filesystem::path resolved_data_dir(const ExperimentConfig& c) {
  if (!c.data_dir.empty()) return c.data_dir;
  // Debian's dataset-fashion-mnist installs the real files here.
  if (c.dataset == DatasetKind::fashion_mnist) return "/usr/share/datasets/fashion-mnist";
  return {};
}

DataFiles data_files(const ExperimentConfig& c) {
  const auto dir = resolved_data_dir(c);
  switch (c.dataset) {
    case DatasetKind::fashion_mnist:
    case DatasetKind::mnist:
      return {{dir / "train-images-idx3-ubyte", dir / "train-labels-idx1-ubyte"},
              {dir / "t10k-images-idx3-ubyte", dir / "t10k-labels-idx1-ubyte"}};
    case DatasetKind::cifar10: {
      DataFiles files{{}, {dir / "test_batch.bin"}};
      for (int i = 1; i <= 5; ++i)
        files.train.push_back(dir / ("data_batch_" + std::to_string(i) + ".bin"));
      return files;
    }
    case DatasetKind::cifar100:
      return {{dir / "train.bin"}, {dir / "test.bin"}};
    case DatasetKind::synthetic:
      break;
  }
  return {};
}

std::vector<std::string> missing_data_files(const ExperimentConfig& c) {
  if (c.dataset == DatasetKind::synthetic) return {};
  const auto dir = resolved_data_dir(c);
  const std::string dataset = "\"" + std::string(name_of(c.dataset)) + "\"";
  if (dir.empty()) return {"data_dir: dataset " + dataset + " needs a data_dir"};
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return {"data_dir: \"" + dir.string() + "\" is not a directory (dataset " + dataset + ")"};
  std::vector<std::string> missing;
  auto files = data_files(c);
  files.train.insert(files.train.end(), files.test.begin(), files.test.end());
  for (const auto& file : files.train) {
    // IDX files are read gzipped, as distributed, or unpacked.
    bool found = std::filesystem::exists(file, ec) ||
                 (is_idx(c.dataset) && std::filesystem::exists(file.string() + ".gz", ec));
    if (!found)
      missing.push_back("data_dir: missing \"" + file.string() + (is_idx(c.dataset) ? ".gz" : "") +
                        "\" for dataset " + dataset);
  }
  return missing;
}

std::vector<std::string> data_file_problems(const ExperimentConfig& c) {
  auto problems = missing_data_files(c);
  if (c.dataset == DatasetKind::synthetic || !problems.empty()) return problems;
  const std::string dataset = "\"" + std::string(name_of(c.dataset)) + "\"";
  auto unusable = [&](const std::filesystem::path& file, const std::string& why) {
    problems.push_back("data_dir: \"" + file.string() + "\" " + why + " (dataset " + dataset + ")");
  };
  const auto files = data_files(c);
  if (is_idx(c.dataset)) {
    for (const auto* split : {&files.train, &files.test}) {
      std::vector<std::pair<std::filesystem::path, uint32_t>> items;  // images, labels
      for (const auto& name : *split) {
        const auto file = idx_file(name);
        const auto contents = inspect(file, 4 + 4 * 4);
        std::string why =
            contents.unreadable.empty() ? "" : "cannot be read: " + contents.unreadable;
        if (why.empty())
          if (auto n = idx_items(contents, why)) items.emplace_back(file, *n);
        if (!why.empty()) unusable(file, why);
      }
      if (items.size() == 2 && items[0].second != items[1].second)
        unusable(items[1].first, "has " + std::to_string(items[1].second) + " labels for the " +
                                     std::to_string(items[0].second) + " images of \"" +
                                     items[0].first.string() + "\"");
    }
    return problems;
  }
  // CIFAR: records of label byte(s) and 3x32x32 pixels, as many as the file holds.
  const uint64_t record = (c.dataset == DatasetKind::cifar100 ? 2 : 1) + 3 * 32 * 32;
  auto all = files.train;
  all.insert(all.end(), files.test.begin(), files.test.end());
  for (const auto& file : all) {
    const auto contents = inspect(file, 0);
    if (!contents.unreadable.empty())
      unusable(file, "cannot be read: " + contents.unreadable);
    else if (contents.bytes == 0 || contents.bytes % record != 0)
      unusable(file, "holds " + std::to_string(contents.bytes) + " bytes" +
                         (contents.gzipped ? " uncompressed" : "") + ", not a whole number of " +
                         std::to_string(record) + "-byte CIFAR records");
  }
  return problems;
}

}  // namespace flotilla
