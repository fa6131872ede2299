// The multi-tensor optimizer step, on both of its paths (foreach, per
// parameter), against LibTorch's per-parameter torch::optim::SGD and AdamW:
// the same gradients into both, several steps with a changing learning rate,
// parameters equal to 1e-6 at every step; the two paths equal bit for bit.

#include <gtest/gtest.h>

#include <string>

#include "data/dataset.h"
#include "models/model_factory.h"
#include "optim/multi_tensor_optimizer.h"

namespace flotilla {
namespace {

struct OptimCase {
  std::string name;
  ModelKind model;
  OptimizerConfig optimizer;
};

// What ctest lists beside the test's name: the case's name, not its bytes.
void PrintTo(const OptimCase& c, std::ostream* out) {
  *out << c.name;
}

OptimizerConfig sgd(double momentum, double weight_decay) {
  return {OptimizerKind::sgd, 0.05, momentum, weight_decay};
}
OptimizerConfig adamw(double weight_decay) {
  return {OptimizerKind::adamw, 1e-3, 0.0, weight_decay};
}

std::unique_ptr<torch::optim::Optimizer> per_parameter(const OptimizerConfig& o,
                                                       std::vector<torch::Tensor> params) {
  if (o.name == OptimizerKind::adamw)
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  return std::make_unique<torch::optim::SGD>(
      params, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
}

std::vector<torch::Tensor> model_parameters(ModelKind kind) {
  ExperimentConfig c;
  c.model = kind;
  c.dataset = DatasetKind::synthetic;
  c.vit = {4, 64, 2, 4, 128};  // a small ViT: 2 blocks of width 64
  return build_model(c, {{3, 32, 32}, 10})->parameters();
}

std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

class MultiTensorStep : public ::testing::TestWithParam<OptimCase> {
 protected:
  void ExpectEqualsTorchOptim(optim::StepPath path);
};

TEST_P(MultiTensorStep, EqualsThePerParameterStepOverSeveralSteps) {
  ExpectEqualsTorchOptim(optim::StepPath::foreach);
  // AdamW takes foreach on every device; SGD has both paths.
  if (GetParam().optimizer.name == OptimizerKind::sgd)
    ExpectEqualsTorchOptim(optim::StepPath::per_parameter);
}

void MultiTensorStep::ExpectEqualsTorchOptim(optim::StepPath path) {
  SCOPED_TRACE(path == optim::StepPath::foreach ? "foreach" : "per parameter");
  const auto& c = GetParam();
  torch::manual_seed(7);
  const auto original = model_parameters(c.model);
  auto reference_params = copies(original);
  auto foreach_params = copies(original);
  auto reference = per_parameter(c.optimizer, reference_params);
  optim::MultiTensorOptimizer multi(c.optimizer, foreach_params, path);

  constexpr int kSteps = 5;
  for (int step = 0; step < kSteps; ++step) {
    const double lr = c.optimizer.lr * (1.0 - 0.1 * step);  // a schedule moves it every step
    for (auto& group : reference->param_groups()) group.options().set_lr(lr);
    multi.set_lr(lr);
    for (size_t i = 0; i < original.size(); ++i) {
      // At step 2 the first parameter has no gradient (frozen): both skip it,
      // and AdamW's bias correction for it then lags the others by a step.
      if (step == 2 && i == 0) {
        reference_params[i].mutable_grad().reset();
        foreach_params[i].mutable_grad().reset();
        continue;
      }
      auto g = torch::randn_like(original[i]);
      reference_params[i].mutable_grad() = g.clone();
      foreach_params[i].mutable_grad() = g.clone();
    }
    reference->step();
    multi.step();
    double worst = 0;
    bool moved = false;
    for (size_t i = 0; i < original.size(); ++i) {
      worst = std::max(worst, (reference_params[i] - foreach_params[i]).abs().max().item<double>());
      moved = moved || !torch::equal(foreach_params[i], original[i]);
    }
    EXPECT_LE(worst, 1e-6) << "step " << step + 1;
    EXPECT_TRUE(moved) << "step " << step + 1 << " changed no parameter";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, MultiTensorStep,
    ::testing::Values(OptimCase{"ResNet18_SgdMomentumWeightDecay", ModelKind::resnet18,
                                sgd(0.9, 5e-4)},
                      OptimCase{"ResNet18_PlainSgd", ModelKind::resnet18, sgd(0.0, 0.0)},
                      OptimCase{"ResNet18_AdamW", ModelKind::resnet18, adamw(0.01)},
                      OptimCase{"MobileNetV2_SgdMomentum", ModelKind::mobilenet_v2, sgd(0.9, 0.0)},
                      OptimCase{"MobileNetV2_AdamW", ModelKind::mobilenet_v2, adamw(0.05)},
                      OptimCase{"SmallViT_SgdMomentumWeightDecay", ModelKind::vit, sgd(0.9, 1e-4)},
                      OptimCase{"SmallViT_AdamWNoDecay", ModelKind::vit, adamw(0.0)}),
    [](const ::testing::TestParamInfo<OptimCase>& info) { return info.param.name; });

// SGD is the optimizer with two paths (AdamW takes foreach on every device).
TEST(MultiTensorOptimizer, BothSgdPathsGiveTheSameBitsOverSeveralSteps) {
  for (const auto& settings : {sgd(0.9, 5e-4), sgd(0.0, 1e-4), sgd(0.9, 0.0)}) {
    SCOPED_TRACE("momentum " + std::to_string(settings.momentum) + ", weight decay " +
                 std::to_string(settings.weight_decay));
    torch::manual_seed(7);
    const auto original = model_parameters(ModelKind::resnet18);
    auto a = copies(original), b = copies(original);
    optim::MultiTensorOptimizer foreach_step(settings, a, optim::StepPath::foreach);
    optim::MultiTensorOptimizer loop_step(settings, b, optim::StepPath::per_parameter);
    for (int step = 0; step < 4; ++step) {
      for (size_t i = 0; i < original.size(); ++i) {
        if (step == 1 && i == 1) {  // frozen for a step
          a[i].mutable_grad().reset();
          b[i].mutable_grad().reset();
          continue;
        }
        auto g = torch::randn_like(original[i]);
        a[i].mutable_grad() = g.clone();
        b[i].mutable_grad() = g.clone();
      }
      foreach_step.step();
      loop_step.step();
      for (size_t i = 0; i < original.size(); ++i)
        ASSERT_TRUE(torch::equal(a[i], b[i])) << "step " << step + 1 << ", parameter " << i;
    }
  }
}

TEST(MultiTensorOptimizer, AStepWithoutGradientsChangesNothing) {
  auto params = copies(model_parameters(ModelKind::small_cnn));
  const auto before = copies(params);
  optim::MultiTensorOptimizer multi(adamw(0.01), params);
  multi.step();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], before[i]));
}

}  // namespace
}  // namespace flotilla
