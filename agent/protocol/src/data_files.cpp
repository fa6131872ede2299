#include "flotilla/protocol/experiment_config.h"

namespace flotilla {
namespace {

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

}  // namespace flotilla
