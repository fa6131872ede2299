#include "flotilla/protocol/experiment_config.h"

namespace flotilla {
namespace {

// What each data set reads, relative to its data_dir.
std::vector<std::string> required_files(DatasetKind dataset) {
  switch (dataset) {
    case DatasetKind::fashion_mnist:
    case DatasetKind::mnist:
      return {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
              "t10k-labels-idx1-ubyte"};
    case DatasetKind::cifar10:
      return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
              "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    case DatasetKind::cifar100:
      return {"train.bin", "test.bin"};
    case DatasetKind::synthetic:
      break;
  }
  return {};
}

bool is_idx(DatasetKind d) {
  return d == DatasetKind::fashion_mnist || d == DatasetKind::mnist;
}

}  // namespace

std::filesystem::path resolved_data_dir(const ExperimentConfig& c) {
  if (!c.data_dir.empty()) return c.data_dir;
  // Debian's dataset-fashion-mnist installs the real files here.
  if (c.dataset == DatasetKind::fashion_mnist) return "/usr/share/datasets/fashion-mnist";
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
  for (const auto& name : required_files(c.dataset)) {
    const auto file = dir / name;
    // IDX files are read gzipped, as distributed, or unpacked.
    bool found = std::filesystem::exists(file, ec) ||
                 (is_idx(c.dataset) && std::filesystem::exists(file.string() + ".gz", ec));
    if (!found)
      missing.push_back("data_dir: missing \"" + file.string() + (is_idx(c.dataset) ? ".gz" : "") +
                        "\" for dataset " + dataset);
  }
  return missing;
}

}  // namespace flotilla
