#include "readers.h"

#include <zlib.h>

#include <memory>
#include <stdexcept>

namespace flotilla::data {
namespace {

// gzread passes files that are not gzipped through unchanged.
std::vector<uint8_t> read_maybe_gzipped(const std::filesystem::path& file) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> in(gzopen(file.c_str(), "rb"), gzclose);
  if (!in) throw std::runtime_error(file.string() + ": cannot open");
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    int n = gzread(in.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) throw std::runtime_error(file.string() + ": read error (corrupt gzip data?)");
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  return bytes;
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

torch::Tensor read_idx(const std::filesystem::path& requested) {
  auto file = requested;
  if (!std::filesystem::exists(file) && std::filesystem::exists(file.string() + ".gz"))
    file += ".gz";
  const auto bytes = read_maybe_gzipped(file);
  // Magic: two zero bytes, type 0x08 (unsigned byte), number of dimensions.
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] == 0)
    throw std::runtime_error(file.string() + ": not an IDX file of unsigned bytes");
  const size_t dims = bytes[3];
  if (bytes.size() < 4 + 4 * dims)
    throw std::runtime_error(file.string() + ": truncated IDX header");
  std::vector<int64_t> shape;
  size_t count = 1;
  for (size_t d = 0; d < dims; ++d) {
    shape.push_back(big_endian(&bytes[4 + 4 * d]));
    count *= static_cast<size_t>(shape.back());
  }
  const size_t offset = 4 + 4 * dims;
  if (bytes.size() != offset + count)
    throw std::runtime_error(file.string() + ": IDX header promises " + std::to_string(count) +
                             " bytes of data, file has " + std::to_string(bytes.size() - offset));
  return torch::from_blob(const_cast<uint8_t*>(bytes.data() + offset), shape, torch::kUInt8)
      .clone();
}

LabelledImages read_cifar(const std::vector<std::filesystem::path>& files, int label_bytes) {
  constexpr int64_t kPixels = 3 * 32 * 32;
  const int64_t record = label_bytes + kPixels;
  std::vector<torch::Tensor> images, labels;
  for (const auto& file : files) {
    const auto bytes = read_maybe_gzipped(file);
    if (bytes.empty() || bytes.size() % record != 0)
      throw std::runtime_error(file.string() + ": " + std::to_string(bytes.size()) +
                               " bytes is not a whole number of " + std::to_string(record) +
                               "-byte CIFAR records");
    const int64_t n = static_cast<int64_t>(bytes.size()) / record;
    auto raw = torch::from_blob(const_cast<uint8_t*>(bytes.data()), {n, record}, torch::kUInt8);
    images.push_back(raw.narrow(1, label_bytes, kPixels).reshape({n, 3, 32, 32}).clone());
    labels.push_back(raw.select(1, label_bytes - 1).to(torch::kInt64));
  }
  return {torch::cat(images), torch::cat(labels)};
}

}  // namespace flotilla::data
