// Throughput of the activation codecs on ReLU-like activations, with a full
// torch::sort of the same tensor as the yardstick that sort_quant's selection
// has to beat. Throughput is fp32 input bytes per second, both ways.
// --device picks where the values live; both paths are timed on it: "cpu path"
// (the hand-written CPU codec, a CUDA tensor going through the host and back)
// and "tensor ops" (tensor_codec.h, run on the values' device).
// --seed-shapes: the boundary of the seed's MobileNetV2 pipeline (224x224,
// micro-batches of 32) as the model itself makes it, and what encoding and
// decoding it costs beside that micro-batch's forward and backward; its last
// lines ("TABLE\t...") are gpu_check.sh's table rows.
#include <torch/cuda.h>
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "codec/activation_codec.h"
#include "codec/tensor_codec.h"
#include "models/layers.h"
#include "models/mobilenet_v2.h"

namespace flotilla {
namespace {

struct Shape {
  std::string name;
  std::vector<int64_t> sizes;
};

// Fastest of `repeats` runs after one warm-up: the least disturbed by other
// work on a shared machine.
bool on_cuda = false;

// Waits for the GPU's queued work, so that a timing covers it.
void finish_device_work() {
  if (on_cuda) torch::cuda::synchronize();
}

template <class Work>
double best_seconds(int repeats, const Work& work) {
  work();
  finish_device_work();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    finish_device_work();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

double gigabytes(const torch::Tensor& t) {
  return t.numel() * 4.0 / 1e9;
}

void print_header() {
  std::printf("%-22s %-34s %-10s %8s %10s %9s %10s %9s %11s %11s\n", "tensor", "codec", "path",
              "ratio", "enc ms", "enc GB/s", "dec ms", "dec GB/s", "max |err|", "rms err");
}

void bench_tensor(const Shape& shape, const std::vector<CompressionConfig>& settings, int repeats,
                  const std::string& filter, const torch::Device& device) {
  torch::manual_seed(0);
  const auto values = torch::relu(torch::randn(shape.sizes) + 0.4).to(device);  // a third zeros
  const double gb = gigabytes(values);

  for (const auto& setting : settings) {
    const auto codec = make_codec(setting);
    if (codec->describe().find(filter) == std::string::npos) continue;
    const int bits = static_cast<int>(setting.bits);
    const int split_bits =
        setting.method == CompressionMethod::sort_quant ? static_cast<int>(setting.split_bits) : 0;
    // The CPU path as a CUDA tensor met it before tensor_codec: to the host and back.
    const auto cpu_path_encode = [&] { return codec->encode(values.cpu()).to(device); };
    const auto cpu_path_decode = [&](const torch::Tensor& p) {
      return codec->decode(p.cpu(), values.numel()).to(device);
    };
    const auto tensor_encode = [&] { return codec::tensor_ops_encode(values, bits, split_bits); };
    const auto tensor_decode = [&](const torch::Tensor& p) {
      return codec::tensor_ops_decode(p, values.numel(), bits, split_bits);
    };
    for (const bool tensor_ops : {false, true}) {
      torch::Tensor payload, decoded;
      const double encode_s = best_seconds(
          repeats, [&] { payload = tensor_ops ? tensor_encode() : cpu_path_encode(); });
      const double decode_s = best_seconds(repeats, [&] {
        decoded = tensor_ops ? tensor_decode(payload) : cpu_path_decode(payload);
      });
      const double ratio = values.numel() * 4.0 / payload.numel();
      const auto error = decoded - values.reshape({-1});
      std::printf("%-22s %-34s %-10s %7.2fx %10.2f %9.2f %10.2f %9.2f %11.3e %11.3e\n",
                  shape.name.c_str(), codec->describe().c_str(),
                  tensor_ops ? "tensor ops" : "cpu path", ratio, encode_s * 1e3, gb / encode_s,
                  decode_s * 1e3, gb / decode_s, error.abs().max().item<double>(),
                  error.square().mean().sqrt().item<double>());
    }
  }
  const auto flat = values.reshape({-1});
  const double sort_s = best_seconds(repeats, [&] { torch::sort(flat); });
  std::printf("%-22s %-34s %-10s %8s %10.2f %9.2f %10s %9s %11s %11s\n", shape.name.c_str(),
              "torch::sort (full, for reference)", "-", "-", sort_s * 1e3, gb / sort_s, "-", "-",
              "-", "-");
}

// Issue 26's goal: encoding and decoding a boundary costs at most this
// share of its micro-batch's forward and backward.
constexpr double kBoundaryShareGoal = 0.10;

// The seed's pipeline: MobileNetV2 at 224x224, a batch of 256 in 8
// micro-batches of 32, cut after the stem ([32,32,112,112]) and before the
// head ([32,1280,7,7]). The boundary tensors are the model's own activations
// (ReLU's zeros included), not stand-ins.
int bench_seed_shapes(const CompressionConfig& setting, int repeats, const torch::Device& device) {
  torch::manual_seed(0);
  models::MobileNetV2Options options;
  options.classes = 1000;
  options.imagenet_strides = true;
  auto model = models::mobilenet_v2(options);
  model->to(device);
  model->train();
  const auto input = torch::randn({32, 3, 224, 224}, torch::TensorOptions(device));
  const auto labels = torch::randint(1000, {32}, torch::TensorOptions(device).dtype(torch::kLong));

  const double step_s = best_seconds(repeats, [&] {
    model->zero_grad();
    torch::nn::functional::cross_entropy(model->forward(input), labels).backward();
  });
  std::vector<torch::Tensor> boundaries;
  {
    torch::NoGradGuard no_grad;
    const int64_t blocks = static_cast<int64_t>(model->size());
    boundaries.push_back(models::forward_blocks(model, 0, 1, input));
    boundaries.push_back(models::forward_blocks(model, 0, blocks - 1, input));
  }
  std::printf("MobileNetV2 (ImageNet strides) b32 3x224x224 forward+backward: %.2f ms\n",
              step_s * 1e3);
  const auto codec = make_codec(setting);
  const int bits = static_cast<int>(setting.bits);
  const int split_bits = static_cast<int>(setting.split_bits);
  print_header();
  std::vector<std::string> rows;
  for (const auto& values : boundaries) {
    std::string dims;
    for (const auto size : values.sizes()) dims += (dims.empty() ? "" : "x") + std::to_string(size);
    torch::Tensor payload, decoded;
    const double encode_s = best_seconds(
        repeats, [&] { payload = codec::tensor_ops_encode(values, bits, split_bits); });
    const double decode_s = best_seconds(repeats, [&] {
      decoded = codec::tensor_ops_decode(payload, values.numel(), bits, split_bits);
    });
    const auto flat = values.reshape({-1});
    const double sort_s = best_seconds(repeats, [&] { torch::sort(flat); });
    const auto error = decoded - flat;
    const double gb = gigabytes(values);
    std::printf("%-22s %-34s %-10s %7.2fx %10.3f %9.2f %10.3f %9.2f %11.3e %11.3e\n", dims.c_str(),
                codec->describe().c_str(), "tensor ops", values.numel() * 4.0 / payload.numel(),
                encode_s * 1e3, gb / encode_s, decode_s * 1e3, gb / decode_s,
                error.abs().max().item<double>(), error.square().mean().sqrt().item<double>());
    const double zeros = (values == 0).sum().item<double>() / values.numel();
    const double share = (encode_s + decode_s) / step_s;
    char row[512];
    std::snprintf(row, sizeof row,
                  "TABLE\tcodec\t%s %s (%.0f%% zeros)\tencode %.3f + decode %.3f ms = %.1f%% "
                  "of the micro-batch's forward+backward %.2f ms (a full torch::sort: %.3f "
                  "ms)\t%s",
                  dims.c_str(), codec->describe().c_str(), zeros * 100, encode_s * 1e3,
                  decode_s * 1e3, share * 100, step_s * 1e3, sort_s * 1e3,
                  share <= kBoundaryShareGoal ? "OK (<= 10%)" : "OVER 10%");
    rows.push_back(row);
  }
  for (const auto& row : rows) std::printf("%s\n", row.c_str());
  return 0;
}

}  // namespace
}  // namespace flotilla

int main(int argc, char** argv) {
  using flotilla::CompressionMethod;
  CLI::App app{"Activation codec throughput (fp32 input GB/s) against a full torch::sort"};
  int threads = 0, repeats = 3;
  std::string filter, device_name = "cpu";
  app.add_option("--threads", threads, "intra-op threads; 0: LibTorch's default");
  app.add_option("--repeats", repeats, "timed runs per measurement, after one warm-up")
      ->check(CLI::PositiveNumber);
  app.add_option("--filter", filter,
                 "only codecs whose description contains this, e.g. sort_quant");
  app.add_option("--device", device_name, "where the values live: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  bool seed_shapes = false;
  app.add_flag("--seed-shapes", seed_shapes,
               "only the seed's MobileNetV2 boundary (224x224, micro-batch 32) with 8-bit "
               "sort_quant, against that micro-batch's forward and backward");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured
  if (threads > 0) at::set_num_threads(threads);
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr,
                 "codec_bench: --device cuda: no CUDA here (this LibTorch was built without CUDA "
                 "or sees no GPU: %d visible); use --device cpu\n",
                 static_cast<int>(torch::cuda::device_count()));
    return 3;
  }
  flotilla::on_cuda = device_name == "cuda";
  const torch::Device device = flotilla::on_cuda ? torch::Device(torch::kCUDA) : torch::kCPU;

  if (seed_shapes) {
    std::printf("device: %s, intra-op threads: %d, best of %d runs after a warm-up\n",
                device_name.c_str(), at::get_num_threads(), repeats);
    return flotilla::bench_seed_shapes({CompressionMethod::sort_quant, 6, 2}, repeats, device);
  }
  const std::vector<flotilla::CompressionConfig> settings = {
      {CompressionMethod::uniform, 4, 0},    {CompressionMethod::uniform, 8, 0},
      {CompressionMethod::uniform, 12, 0},   {CompressionMethod::uniform, 16, 0},
      {CompressionMethod::sort_quant, 3, 1}, {CompressionMethod::sort_quant, 6, 2},
      {CompressionMethod::sort_quant, 9, 3}, {CompressionMethod::sort_quant, 12, 4},
  };
  const std::vector<flotilla::Shape> shapes = {
      {"64x32x28x28 (6.4 MB)", {64, 32, 28, 28}},
      {"64x64x64x64 (64 MiB)", {64, 64, 64, 64}},
      // The seed's MobileNetV2 boundary tensors per micro-batch (256 in 8 chunks, 224x224).
      {"32x32x112x112 (51 MB)", {32, 32, 112, 112}},
      {"32x1280x7x7 (8 MB)", {32, 1280, 7, 7}},
  };
  std::printf("device: %s, intra-op threads: %d, best of %d runs after a warm-up\n",
              device_name.c_str(), at::get_num_threads(), repeats);
  flotilla::print_header();
  for (const auto& shape : shapes) flotilla::bench_tensor(shape, settings, repeats, filter, device);
  return 0;
}
