// AutoCache (elastic.cache): the frozen prefix's forward over a batch,
// recomputed, against reading its outputs from the cache, all in memory and
// all in the file of the run folder, in the same run. The model is seed 000's
// (ViT), its leading half frozen. Prints figures and ratios (recompute /
// cached); asserts nothing.
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "best_time.h"
#include "data/dataset.h"
#include "freeze/prefix_cache.h"
#include "models/layers.h"
#include "models/model_factory.h"

namespace flotilla {
namespace {

int run(int argc, char** argv) {
  CLI::App app{"prefix_cache_bench"};
  int64_t batch = 64, samples = 1024;
  int repeats = 10;
  std::string model = "vit", folder = std::filesystem::temp_directory_path().string();
  app.add_option("--model", model, "vit (default), resnet18, mobilenet_v2, small_cnn");
  app.add_option("--batch", batch, "samples a batch, default 64");
  app.add_option("--samples", samples, "training samples cached, default 1024");
  app.add_option("--repeats", repeats, "timed batches, best kept, default 10");
  app.add_option("--folder", folder, "where the spilled cache's file goes");
  CLI11_PARSE(app, argc, argv);

  const auto config = parse_experiment("model: " + model +
                                       "\ndataset: synthetic\nsynthetic: {shape: [3, 32, 32]}\n");
  auto net = build_model(config, data::expected_shape(config));
  const int64_t frozen = static_cast<int64_t>(net->size()) / 2;
  for (int64_t b = 0; b < frozen; ++b) (net->begin() + b)->ptr()->eval();
  torch::NoGradGuard no_grad;
  const auto inputs = torch::randn({samples, 3, 32, 32});

  const auto fill = [&](PrefixCache& cache) {
    cache.set_blocks(frozen);
    for (int64_t start = 0; start < samples; start += batch) {
      const auto index = torch::arange(start, std::min(samples, start + batch), torch::kInt64);
      cache.store(index, models::forward_blocks(net, 0, frozen, inputs.index_select(0, index)));
    }
  };
  PrefixCache in_memory(samples, int64_t(1) << 40, folder), spilled(samples, 0, folder);
  fill(in_memory);
  fill(spilled);
  const auto batch_index = torch::randperm(samples, torch::kInt64).narrow(0, 0, batch);
  const auto batch_inputs = inputs.index_select(0, batch_index);

  const double recompute =
      best_ms(repeats, [&] { models::forward_blocks(net, 0, frozen, batch_inputs); });
  const double memory = best_ms(repeats, [&] { in_memory.lookup(batch_index); });
  const double file = best_ms(repeats, [&] { spilled.lookup(batch_index); });
  const auto one = models::forward_blocks(net, 0, frozen, batch_inputs.narrow(0, 0, 1));
  std::printf(
      "model %s, %lld of %lld blocks frozen, batch %lld of %lld cached samples, %lld "
      "threads\n",
      model.c_str(), (long long)frozen, (long long)net->size(), (long long)batch,
      (long long)samples, (long long)torch::get_num_threads());
  std::printf("  one sample's prefix output: %lld bytes\n",
              (long long)(one.numel() * one.element_size()));
  std::printf("  %-28s %9.3f ms\n", "recompute the prefix", recompute);
  std::printf("  %-28s %9.3f ms   recompute / this %6.1fx\n", "read, in memory", memory,
              recompute / memory);
  std::printf("  %-28s %9.3f ms   recompute / this %6.1fx\n", "read, from the file", file,
              recompute / file);
  return 0;
}

}  // namespace
}  // namespace flotilla

int main(int argc, char** argv) {
  return flotilla::run(argc, argv);
}
