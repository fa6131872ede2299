// Throughput of the activation codecs on ReLU-like activations, with a full
// torch::sort of the same tensor as the yardstick that sort_quant's selection
// has to beat. Throughput is fp32 input bytes per second, both ways.
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "codec/activation_codec.h"

namespace flotilla {
namespace {

struct Shape {
  std::string name;
  std::vector<int64_t> sizes;
};

// Fastest of `repeats` runs after one warm-up: the least disturbed by other
// work on a shared machine.
template <class Work>
double best_seconds(int repeats, const Work& work) {
  work();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

double gigabytes(const torch::Tensor& t) {
  return t.numel() * 4.0 / 1e9;
}

void print_header() {
  std::printf("%-22s %-34s %8s %10s %9s %10s %9s %11s %11s\n", "tensor", "codec", "ratio", "enc ms",
              "enc GB/s", "dec ms", "dec GB/s", "max |err|", "rms err");
}

void bench_tensor(const Shape& shape, const std::vector<CompressionConfig>& settings, int repeats,
                  const std::string& filter) {
  torch::manual_seed(0);
  const auto values = torch::relu(torch::randn(shape.sizes) + 0.4);  // a third exact zeros
  const double gb = gigabytes(values);

  for (const auto& setting : settings) {
    const auto codec = make_codec(setting);
    if (codec->describe().find(filter) == std::string::npos) continue;
    torch::Tensor payload, decoded;
    const double encode_s = best_seconds(repeats, [&] { payload = codec->encode(values); });
    const double decode_s =
        best_seconds(repeats, [&] { decoded = codec->decode(payload, values.numel()); });
    const double ratio = values.numel() * 4.0 / payload.numel();
    const auto error = decoded - values.reshape({-1});
    std::printf("%-22s %-34s %7.2fx %10.2f %9.2f %10.2f %9.2f %11.3e %11.3e\n", shape.name.c_str(),
                codec->describe().c_str(), ratio, encode_s * 1e3, gb / encode_s, decode_s * 1e3,
                gb / decode_s, error.abs().max().item<double>(),
                error.square().mean().sqrt().item<double>());
  }
  const auto flat = values.reshape({-1});
  const double sort_s = best_seconds(repeats, [&] { torch::sort(flat); });
  std::printf("%-22s %-34s %8s %10.2f %9.2f %10s %9s %11s %11s\n", shape.name.c_str(),
              "torch::sort (full, for reference)", "-", sort_s * 1e3, gb / sort_s, "-", "-", "-",
              "-");
}

}  // namespace
}  // namespace flotilla

int main(int argc, char** argv) {
  using flotilla::CompressionMethod;
  CLI::App app{"Activation codec throughput (fp32 input GB/s) against a full torch::sort"};
  int threads = 0, repeats = 3;
  std::string filter;
  app.add_option("--threads", threads, "intra-op threads; 0: LibTorch's default");
  app.add_option("--repeats", repeats, "timed runs per measurement, after one warm-up")
      ->check(CLI::PositiveNumber);
  app.add_option("--filter", filter,
                 "only codecs whose description contains this, e.g. sort_quant");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) at::set_num_threads(threads);

  const std::vector<flotilla::CompressionConfig> settings = {
      {CompressionMethod::uniform, 4, 0},    {CompressionMethod::uniform, 8, 0},
      {CompressionMethod::uniform, 12, 0},   {CompressionMethod::uniform, 16, 0},
      {CompressionMethod::sort_quant, 3, 1}, {CompressionMethod::sort_quant, 6, 2},
      {CompressionMethod::sort_quant, 9, 3}, {CompressionMethod::sort_quant, 12, 4},
  };
  const std::vector<flotilla::Shape> shapes = {
      {"64x32x28x28 (6.4 MB)", {64, 32, 28, 28}},
      {"64x64x64x64 (64 MiB)", {64, 64, 64, 64}},
  };
  std::printf("intra-op threads: %d, best of %d runs after a warm-up\n", at::get_num_threads(),
              repeats);
  flotilla::print_header();
  for (const auto& shape : shapes) flotilla::bench_tensor(shape, settings, repeats, filter);
  return 0;
}
