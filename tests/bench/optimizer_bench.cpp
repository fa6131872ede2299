// optimizer_ms of LibTorch's per-parameter torch::optim step against the
// engine's multi-tensor (_foreach_*) step and against the path the engine
// takes on the device (fastest_step_path), on the same parameters and
// gradients in the same run. Prints figures and ratios (torch::optim / ours);
// asserts nothing. --device cuda times the steps on the GPU, each waited for.
#include <torch/cuda.h>
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "best_time.h"
#include "data/dataset.h"
#include "models/model_factory.h"
#include "optim/multi_tensor_optimizer.h"

namespace flotilla {
namespace {

std::vector<torch::Tensor> with_gradients(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) {
    auto copy = p.detach().clone().requires_grad_(true);
    copy.mutable_grad() = torch::randn_like(p);
    out.push_back(copy);
  }
  return out;
}

void bench(const std::string& name, const ExperimentConfig& config, int repeats,
           const torch::Device& device) {
  torch::NoGradGuard no_grad;
  auto model = build_model(config, {{3, 32, 32}, 10});
  model->to(device);
  const auto params = model->parameters();
  // A step's kernels are queued on a GPU: the timing waits for them.
  const auto timed = [&](auto&& step) {
    return best_ms(repeats, [&] {
      step();
      if (device.is_cuda()) torch::cuda::synchronize();
    });
  };
  const OptimizerConfig settings[] = {{OptimizerKind::sgd, 0.01, 0.9, 5e-4},
                                      {OptimizerKind::adamw, 1e-3, 0.0, 0.01}};
  for (const auto& o : settings) {
    auto a = with_gradients(params);
    auto b = with_gradients(params);
    std::unique_ptr<torch::optim::Optimizer> reference;
    if (o.name == OptimizerKind::adamw)
      reference = std::make_unique<torch::optim::AdamW>(
          a, torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
    else
      reference = std::make_unique<torch::optim::SGD>(
          a, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
    auto c = with_gradients(params);
    optim::MultiTensorOptimizer multi(o, b, optim::StepPath::foreach);
    const auto path = optim::fastest_step_path(o.name, device);
    optim::MultiTensorOptimizer engine(o, c, path);
    const double per_parameter_ms = timed([&] { reference->step(); });
    const double foreach_ms = timed([&] { multi.step(); });
    const double engine_ms = timed([&] { engine.step(); });
    std::printf("%-12s %-6s %8zu %12.3f %12.3f %9.2fx %10.3f %-13s %9.2fx\n", name.c_str(),
                std::string(name_of(o.name)).c_str(), params.size(), per_parameter_ms, foreach_ms,
                per_parameter_ms / foreach_ms, engine_ms,
                path == optim::StepPath::foreach ? "(foreach)" : "(per param)",
                per_parameter_ms / engine_ms);
    // gpu_check.sh's table row: the engine's path against the faster of the two
    // (within 5 %: the noise of one best-of run).
    const double fastest_ms = std::min(per_parameter_ms, foreach_ms);
    std::printf(
        "TABLE\toptimizer\t%s %s on %s\tper-param %.3f, foreach %.3f, engine %.3f ms "
        "(%s)\t%s\n",
        name.c_str(), std::string(name_of(o.name)).c_str(), device.str().c_str(), per_parameter_ms,
        foreach_ms, engine_ms, path == optim::StepPath::foreach ? "foreach" : "per param",
        engine_ms <= fastest_ms * 1.05 ? "OK" : "SLOWER than the faster path");
  }
}

}  // namespace
}  // namespace flotilla

int main(int argc, char** argv) {
  CLI::App app{"optimizer_ms: torch::optim per parameter vs the engine's _foreach_ step"};
  int threads = 0, repeats = 10;
  std::string device_name = "cpu";
  app.add_option("--device", device_name, "where the parameters live: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--threads", threads, "intra-op threads; 0: LibTorch's default");
  app.add_option("--repeats", repeats, "timed steps per measurement, after one warm-up")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) at::set_num_threads(threads);
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "optimizer_bench: --device cuda: no CUDA here; use --device cpu\n");
    return 3;
  }
  const torch::Device device = device_name == "cuda" ? torch::kCUDA : torch::kCPU;

  flotilla::ExperimentConfig resnet, mobilenet, vit;
  resnet.model = flotilla::ModelKind::resnet18;
  mobilenet.model = flotilla::ModelKind::mobilenet_v2;
  vit.model = flotilla::ModelKind::vit;  // the default small ViT: 6 blocks of width 128
  std::printf("device: %s, intra-op threads: %d, best of %d steps after a warm-up\n",
              device_name.c_str(), at::get_num_threads(), repeats);
  std::printf("%-12s %-6s %8s %12s %12s %10s %10s %-13s %10s\n", "model", "optim", "tensors",
              "per-param ms", "foreach ms", "ratio", "engine ms", "(its path)", "ratio");
  flotilla::bench("resnet18", resnet, repeats, device);
  flotilla::bench("mobilenet_v2", mobilenet, repeats, device);
  flotilla::bench("vit", vit, repeats, device);
  return 0;
}
