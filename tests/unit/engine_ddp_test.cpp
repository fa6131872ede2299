// DDP's bucketed, overlapped gradient all-reduce on Gloo over 127.0.0.1, one
// thread per rank (as c10d's own tests do), against one process training on
// the concatenated batch.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "comm/gradient_buckets.h"
#include "flotilla/engine/training.h"
#include "models/model_factory.h"
#include "ports.h"
#include "strategy/data_parallel.h"

namespace flotilla {
namespace {

constexpr int64_t kBatchPerRank = 8;
constexpr int kSteps = 3;
constexpr double kLr = 0.1;

torch::nn::Sequential small_cnn(uint64_t seed) {
  torch::manual_seed(seed);
  ExperimentConfig config;
  auto model = build_model(config, {{1, 28, 28}, 10});
  // Batch statistics differ between a shard and the whole batch; running
  // statistics do not, so the comparison is exact up to float rounding.
  model->eval();
  return model;
}

void sgd_step(torch::nn::Sequential& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) {
    p.sub_(p.grad() * kLr);
    p.mutable_grad().reset();
  }
}

class Ddp : public ::testing::TestWithParam<int> {};

TEST_P(Ddp, BucketedAllReduceMatchesOneProcessOnTheConcatenatedBatch) {
  const int world = GetParam();
  torch::manual_seed(7);
  const auto inputs = torch::randn({world * kBatchPerRank, 1, 28, 28});
  const auto targets = torch::randint(0, 10, {world * kBatchPerRank});

  auto reference = small_cnn(1);
  for (int step = 0; step < kSteps; ++step) {
    torch::nn::functional::cross_entropy(reference->forward(inputs), targets).backward();
    sgd_step(reference);
  }

  // Rank 0 starts as the reference did; the others differently, so that
  // only the broadcast from rank 0 can make them agree.
  std::vector<torch::nn::Sequential> models;
  for (int rank = 0; rank < world; ++rank) models.push_back(small_cnn(rank == 0 ? 1 : 100 + rank));
  const int64_t trainable = parameter_count(*models[0], true);

  const int port = testing::free_tcp_port();
  std::vector<std::vector<int64_t>> bytes_per_step(world);
  std::vector<size_t> buckets(world);
  std::vector<int64_t> started_in_backward(world);
  const auto failures = testing::run_ranks(world, [&](int rank) {
    DistributedEnv env;
    env.rank = rank;
    env.world_size = world;
    env.master_port = port;
    auto comm = Communicator::connect(env, false, std::chrono::seconds(60));
    auto& model = models[rank];
    auto state = model->parameters();
    for (const auto& b : model->buffers()) state.push_back(b);
    {
      torch::NoGradGuard no_grad;
      comm->broadcast(state, 0);
    }
    comm->take_stats();
    // Small buckets, so that the model spans several of them.
    GradientBuckets grads(model->parameters(), *comm, 64 * 1024);
    buckets[rank] = grads.bucket_count();
    const auto shard = inputs.slice(0, rank * kBatchPerRank, (rank + 1) * kBatchPerRank);
    const auto shard_targets = targets.slice(0, rank * kBatchPerRank, (rank + 1) * kBatchPerRank);
    for (int step = 0; step < kSteps; ++step) {
      torch::nn::functional::cross_entropy(model->forward(shard), shard_targets).backward();
      grads.finish();
      bytes_per_step[rank].push_back(comm->take_stats().bytes_sent);
      sgd_step(model);
    }
    started_in_backward[rank] = grads.started_during_backward();
  });
  for (int rank = 0; rank < world; ++rank) ASSERT_EQ(failures[rank], "") << "rank " << rank;

  const auto expected = reference->parameters();
  for (int rank = 0; rank < world; ++rank) {
    const auto got = models[rank]->parameters();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(torch::allclose(got[i], expected[i], 1e-4, 1e-5))
          << "rank " << rank << " parameter " << i << " differs by "
          << (got[i] - expected[i]).abs().max().item<double>();
      EXPECT_TRUE(torch::equal(got[i], models[0]->parameters()[i]))
          << "rank " << rank << " parameter " << i << " differs from rank 0's";
    }
    // Every all-reduce payload is the fp32 gradients of the trainable parameters.
    for (int64_t bytes : bytes_per_step[rank]) EXPECT_EQ(bytes, 4 * trainable);
    EXPECT_GT(buckets[rank], 1u);
    // Every parameter is used, so every bucket started inside backward.
    EXPECT_EQ(started_in_backward[rank], static_cast<int64_t>(buckets[rank]));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Ddp, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

TEST(GradientBucketLayout, FillsBucketsInReverseOrderUpToTheCapAndSkipsNothing) {
  // Four parameters of 4, 4, 8 and 2 KiB; a 8 KiB cap.
  std::vector<torch::Tensor> params{
      torch::zeros({1024}, torch::requires_grad()), torch::zeros({1024}, torch::requires_grad()),
      torch::zeros({2048}, torch::requires_grad()), torch::zeros({512}, torch::requires_grad())};
  DistributedEnv env;
  env.master_port = testing::free_tcp_port();
  auto comm = Communicator::connect(env, false, std::chrono::seconds(30));
  GradientBuckets buckets(params, *comm, 8 * 1024);
  const std::vector<std::vector<size_t>> expected{{3}, {2}, {1, 0}};
  EXPECT_EQ(buckets.bucket_layout(), expected);
  // One rank: the average is the gradient itself, unused parameters get zeros.
  (params[0] * 2).sum().backward();
  buckets.finish();
  EXPECT_TRUE(torch::equal(params[0].grad(), torch::full({1024}, 2.0)));
  EXPECT_TRUE(torch::equal(params[3].grad(), torch::zeros({512})));
  EXPECT_EQ(comm->take_stats().bytes_sent, 4 * (1024 + 1024 + 2048 + 512));
}

TEST(DataParallel, ReplicasOnSeveralDevicesEqualOneModelOnTheWholeBatch) {
  // The same code drives GPUs; two CPU "devices" check the arithmetic anywhere.
  const std::vector<torch::Device> devices{torch::kCPU, torch::kCPU, torch::kCPU};
  torch::manual_seed(7);
  const auto inputs = torch::randn({10, 1, 28, 28});  // 4 + 3 + 3: unequal shares
  const auto targets = torch::randint(0, 10, {10});
  auto reference = small_cnn(1);
  double reference_loss = 0;
  for (int step = 0; step < kSteps; ++step) {
    auto loss = torch::nn::functional::cross_entropy(reference->forward(inputs), targets);
    loss.backward();
    if (step == 0) reference_loss = loss.item<double>();
    sgd_step(reference);
  }
  DataParallel parallel([] { return small_cnn(1); }, devices);
  double first_loss = 0;
  for (int step = 0; step < kSteps; ++step) {
    auto out = parallel.forward(inputs, targets);
    if (step == 0) first_loss = out.loss.item<double>();
    parallel.backward();
    parallel.reduce_gradients();
    sgd_step(parallel.primary());
    parallel.broadcast_primary();
  }
  EXPECT_NEAR(first_loss, reference_loss, 1e-5);
  const auto want = reference->parameters();
  const auto got = parallel.primary()->parameters();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-4, 1e-5))
        << "parameter " << i << " differs by " << (got[i] - want[i]).abs().max().item<double>();
}

}  // namespace
}  // namespace flotilla
