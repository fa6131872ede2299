// precision: bf16 | fp16 in the engine: autocast on and off, the dtypes DDP
// buckets travel in, fp16's loss scale, channels_last, and the refusal of
// what this LibTorch cannot do.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>

#include "comm/communicator.h"
#include "comm/gradient_buckets.h"
#include "flotilla/engine/training.h"
#include "models/model_factory.h"
#include "ports.h"
#include "precision/mixed_precision.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

TEST(Autocast, RunsMatrixProductsInBf16OnTheCpuAndEndsWithItsScope) {
  const auto x = torch::randn({4, 8});
  const auto w = torch::randn({3, 8}, torch::requires_grad());
  {
    AutocastScope bf16(false, torch::kBFloat16);
    EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    {
      AutocastScope off(false, torch::kFloat32);  // float32 leaves the outer scope on
      EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    }
    // The parameter itself stays float32: master weights.
    EXPECT_EQ(w.scalar_type(), torch::kFloat32);
  }
  EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kFloat32);
  EXPECT_EQ(autocast_problem(false, torch::kBFloat16), "");
  EXPECT_EQ(autocast_problem(false, torch::kFloat32), "");
}

TEST(Autocast, AParameterUpdatedBetweenScopesIsCastAfresh) {
  // The cast copy of a weight is cached within a scope; a stale one after
  // the optimizer's step would train on old weights.
  const auto x = torch::ones({1, 2});
  auto w = torch::ones({1, 2}, torch::requires_grad());
  torch::Tensor first, second;
  {
    AutocastScope bf16(false, torch::kBFloat16);
    first = torch::linear(x, w);
  }
  {
    torch::NoGradGuard no_grad;
    w.mul_(3);
  }
  {
    AutocastScope bf16(false, torch::kBFloat16);
    second = torch::linear(x, w);
  }
  EXPECT_EQ(first.item<float>(), 2.0f);
  EXPECT_EQ(second.item<float>(), 6.0f);
}

TEST(Precision, Fp16OnTheCpuIsRefusedNamingTheKeyWhereLibTorchCannot) {
  ExperimentConfig config;
  config.precision = Precision::fp16;
  const auto why = autocast_problem(false, torch::kFloat16);
  const auto problems = unsupported_features(config);
  if (why.empty()) {
    EXPECT_TRUE(problems.empty()) << problems.at(0);
    GTEST_SKIP() << "this LibTorch (" << torch_version() << ") autocasts to float16 on the CPU";
  }
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("precision: \"fp16\" on the CPU needs autocast to float16", 0), 0u)
      << problems[0];
  EXPECT_NE(problems[0].find("use bf16 on the CPU"), std::string::npos) << problems[0];
  config.precision = Precision::bf16;
  EXPECT_TRUE(unsupported_features(config).empty());
}

TEST(LossScaler, SkipsAStepWithAnOverflowHalvesTheScaleAndGrowsAfterTheInterval) {
  LossScaler scaler(true, 1024.0, 3);
  auto p = torch::zeros({2}, torch::requires_grad());
  p.mutable_grad() = torch::full({2}, 512.0);
  ASSERT_TRUE(scaler.unscale({p}));
  EXPECT_TRUE(torch::equal(p.grad(), torch::full({2}, 0.5)));
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024.0);

  p.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity()});
  EXPECT_FALSE(scaler.unscale({p}));
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  // Another rank's overflow skips this rank's step too.
  p.mutable_grad() = torch::ones({2});
  EXPECT_FALSE(scaler.unscale({p}, [](bool) { return false; }));
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 256.0);

  for (int i = 0; i < 3; ++i) scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512.0);

  LossScaler off(false);
  EXPECT_EQ(off.scale(), 1.0);
  p.mutable_grad() = torch::full({2}, 8.0);
  EXPECT_TRUE(off.unscale({p}));
  EXPECT_TRUE(torch::equal(p.grad(), torch::full({2}, 8.0)));
}

TEST(ChannelsLast, ConvolutionWeightsAndImagesTurnNhwcAndComputeTheSame) {
  torch::manual_seed(3);
  ExperimentConfig config;
  auto plain = build_model(config, {{1, 28, 28}, 10});
  torch::manual_seed(3);
  auto nhwc = build_model(config, {{1, 28, 28}, 10});
  to_channels_last(*nhwc);
  int64_t converted = 0;
  for (const auto& p : nhwc->parameters())
    if (p.dim() == 4) {
      EXPECT_TRUE(p.is_contiguous(torch::MemoryFormat::ChannelsLast));
      ++converted;
    }
  EXPECT_EQ(converted, 2);  // the small CNN's two convolutions
  plain->eval();
  nhwc->eval();
  const auto images = torch::randn({4, 1, 28, 28});
  EXPECT_TRUE(
      torch::allclose(plain->forward(images), nhwc->forward(to_channels_last(images)), 1e-4, 1e-5));
}

// What a bf16 or fp16 run's DDP buckets carry: the compute dtype, or float16
// for bf16 where Gloo cannot all-reduce bfloat16 (LibTorch 1.13).
TEST(Precision, GradientWireDtypeIsTwoBytesWheneverPrecisionIsReduced) {
  EXPECT_EQ(gradient_wire_dtype(Precision::fp32, false), torch::kFloat32);
  EXPECT_EQ(gradient_wire_dtype(Precision::fp16, false), torch::kFloat16);
  const auto bf16 = gradient_wire_dtype(Precision::bf16, false);
  EXPECT_EQ(bf16, allreduces(false, torch::kBFloat16) ? torch::kBFloat16 : torch::kFloat16);
  std::printf(
      "Gloo here (LibTorch %s): bfloat16 all-reduce %s; a bf16 run's buckets travel as %s\n",
      torch_version().c_str(), allreduces(false, torch::kBFloat16) ? "yes" : "no",
      dtype_name(bf16).c_str());
}

class ReducedPrecisionBuckets : public ::testing::TestWithParam<torch::ScalarType> {};

TEST_P(ReducedPrecisionBuckets, AverageLikeFloat32WithinRoundingInHalfTheBytes) {
  const auto wire = GetParam();
  if (!allreduces(false, wire))
    GTEST_SKIP() << "Gloo of LibTorch " << torch_version() << " cannot all-reduce "
                 << dtype_name(wire);
  constexpr int kWorld = 2;
  torch::manual_seed(5);
  const auto inputs = torch::randn({kWorld * 8, 1, 28, 28});
  const auto targets = torch::randint(0, 10, {kWorld * 8});
  ExperimentConfig config;
  // Per rank: gradients averaged in float32 buckets, then in `wire` buckets.
  std::vector<std::vector<torch::Tensor>> exact(kWorld), reduced(kWorld);
  std::vector<int64_t> bytes_exact(kWorld), bytes_reduced(kWorld);
  int64_t trainable = 0;
  const int port = testing::free_tcp_port();
  const auto failures = testing::run_ranks(kWorld, [&](int rank) {
    DistributedEnv env;
    env.rank = rank;
    env.world_size = kWorld;
    env.master_port = port;
    auto comm = Communicator::connect(env, false, std::chrono::seconds(60));
    torch::manual_seed(1);
    auto model = build_model(config, {{1, 28, 28}, 10});
    model->eval();
    if (rank == 0) trainable = parameter_count(*model, true);
    const auto shard = inputs.slice(0, rank * 8, (rank + 1) * 8);
    const auto shard_targets = targets.slice(0, rank * 8, (rank + 1) * 8);
    for (auto dtype : {torch::kFloat32, wire}) {
      GradientBuckets buckets(model->parameters(), *comm, 64 * 1024, dtype);
      torch::nn::functional::cross_entropy(model->forward(shard), shard_targets).backward();
      buckets.finish();
      auto& into = dtype == torch::kFloat32 ? exact[rank] : reduced[rank];
      for (const auto& p : model->parameters()) {
        into.push_back(p.grad().clone());
        EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32) << "gradients stay float32";
        p.mutable_grad().reset();
      }
      (dtype == torch::kFloat32 ? bytes_exact : bytes_reduced)[rank] =
          comm->take_stats().bytes_sent;
    }
  });
  for (int rank = 0; rank < kWorld; ++rank) ASSERT_EQ(failures[rank], "") << "rank " << rank;
  // bfloat16 keeps 8 significant bits, float16 11: the average to within that.
  const double tolerance = wire == torch::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(bytes_exact[rank], 4 * trainable);
    EXPECT_EQ(bytes_reduced[rank], 2 * trainable);
    for (size_t i = 0; i < exact[rank].size(); ++i) {
      const auto& e = exact[rank][i];
      const double scale = e.abs().max().item<double>();
      EXPECT_LE((reduced[rank][i] - e).abs().max().item<double>(), 2 * tolerance * scale + 1e-7)
          << "parameter " << i;
      EXPECT_TRUE(torch::equal(reduced[rank][i], reduced[0][i])) << "ranks agree";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ReducedPrecisionBuckets,
                         ::testing::Values(torch::kBFloat16, torch::kFloat16),
                         [](const ::testing::TestParamInfo<torch::ScalarType>& info) {
                           return dtype_name(info.param);
                         });

}  // namespace
}  // namespace flotilla
