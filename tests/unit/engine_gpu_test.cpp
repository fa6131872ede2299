// The CUDA paths: NCCL through the communication layer, DDP's buckets on it
// (fp32 and bf16), autocast on CUDA, CUDA-event step timing, the caching allocator's statistics,
// DataParallel and the codecs on device tensors. Each test skips, saying why, where this LibTorch
// has no CUDA or no GPU is visible.
#include <gtest/gtest.h>

#include "codec/activation_codec.h"
#include "comm/communicator.h"
#include "comm/gradient_buckets.h"
#include "metrics/phase_timer.h"
#include "models/model_factory.h"
#include "ports.h"
#include "strategy/data_parallel.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

#define SKIP_WITHOUT_GPU()                                                                  \
  if (!cuda_usable())                                                                       \
  GTEST_SKIP() << (cuda_compiled() ? "no GPU is visible"                                    \
                                   : "this LibTorch (" + torch_version() + ") has no CUDA") \
               << ": the CUDA path is not exercised here"

const torch::Device kGpu(torch::kCUDA, 0);

torch::nn::Sequential small_cnn_on(torch::Device device) {
  torch::manual_seed(1);
  ExperimentConfig config;
  auto model = build_model(config, {{1, 28, 28}, 10});
  model->eval();
  model->to(device);
  return model;
}

std::unique_ptr<Communicator> one_rank_nccl() {
  DistributedEnv env;
  env.master_port = testing::free_tcp_port();
  return Communicator::connect(env, /*cuda=*/true, std::chrono::seconds(60));
}

TEST(Gpu, NcclAllReduceOfOneRankCountsItsPayload) {
  SKIP_WITHOUT_GPU();
  auto comm = one_rank_nccl();
  std::vector<torch::Tensor> tensors{torch::full({1024}, 3.0, torch::TensorOptions().device(kGpu))};
  comm->allreduce_sum(tensors);
  EXPECT_TRUE(torch::equal(tensors[0].cpu(), torch::full({1024}, 3.0)));
  const auto stats = comm->take_stats();
  EXPECT_EQ(stats.bytes_sent, 4096);
  EXPECT_EQ(stats.allreduce_ranks, 1);
  EXPECT_GT(stats.busy_ms, 0.0);
}

// One backward of the small CNN through DDP's buckets on a one-rank NCCL
// group, all-reduced in `wire`, beside the same model's plain backward on
// the same batch.
struct BucketedBackward {
  std::vector<torch::Tensor> got, want;  // the parameters, their .grad() set
  int64_t bytes_sent = 0;
  int64_t parameters = 0;
  int64_t started_during_backward = 0;
};

BucketedBackward bucketed_backward_on_nccl(torch::ScalarType wire) {
  auto comm = one_rank_nccl();
  auto model = small_cnn_on(kGpu);
  auto reference = small_cnn_on(kGpu);
  GradientBuckets buckets(model->parameters(), *comm, 64 * 1024, wire);
  const auto inputs = torch::randn({16, 1, 28, 28}, torch::TensorOptions().device(kGpu));
  const auto targets =
      torch::randint(0, 10, {16}, torch::TensorOptions().dtype(torch::kInt64).device(kGpu));
  torch::nn::functional::cross_entropy(model->forward(inputs), targets).backward();
  buckets.finish();
  torch::nn::functional::cross_entropy(reference->forward(inputs), targets).backward();
  return {model->parameters(), reference->parameters(), comm->take_stats().bytes_sent,
          parameter_count(*model), buckets.started_during_backward()};
}

TEST(Gpu, DdpBucketsOnNcclAverageTheGradientsAndCountFourBytesAParameter) {
  SKIP_WITHOUT_GPU();
  const auto run = bucketed_backward_on_nccl(torch::kFloat32);
  const auto& got = run.got;
  const auto& want = run.want;
  // cuDNN's convolution backward may sum in another order from run to run.
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i].grad(), want[i].grad(), 1e-4, 1e-5))
        << "gradient " << i << " differs by "
        << (got[i].grad() - want[i].grad()).abs().max().item<double>();
  EXPECT_EQ(run.bytes_sent, 4 * run.parameters);
  EXPECT_GT(run.started_during_backward, 0);
}

TEST(Gpu, Bf16AndFp16AutocastRunTheForwardInTheirDtypeOnCuda) {
  SKIP_WITHOUT_GPU();
  auto model = small_cnn_on(kGpu);
  const auto inputs = torch::randn({8, 1, 28, 28}, torch::TensorOptions().device(kGpu));
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    EXPECT_EQ(autocast_problem(true, dtype), "") << dtype;
    AutocastScope autocast(true, dtype);
    EXPECT_EQ(model->forward(inputs).scalar_type(), dtype);
  }
  EXPECT_EQ(model->forward(inputs).scalar_type(), torch::kFloat32)
      << "autocast ends with its scope";
}

TEST(Gpu, DdpBucketsOnNcclInBf16AverageWithinRoundingInTwoBytesAParameter) {
  SKIP_WITHOUT_GPU();
  EXPECT_TRUE(allreduces(true, torch::kBFloat16));
  const auto run = bucketed_backward_on_nccl(torch::kBFloat16);
  const auto& got = run.got;
  const auto& want = run.want;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].grad().scalar_type(), torch::kFloat32);
    // bfloat16 keeps 8 significant bits.
    const double scale = want[i].grad().abs().max().item<double>();
    EXPECT_LE((got[i].grad() - want[i].grad()).abs().max().item<double>(), scale / 64 + 1e-6)
        << "gradient " << i;
  }
  EXPECT_EQ(run.bytes_sent, 2 * run.parameters);
}

TEST(Gpu, CudaEventTimerPhasesAddUpToTheStep) {
  SKIP_WITHOUT_GPU();
  auto timer = make_phase_timer(/*cuda=*/true);
  auto a = torch::randn({2048, 2048}, torch::TensorOptions().device(kGpu));
  for (int step = 0; step < 2; ++step) {
    timer->begin_step();
    auto b = a.matmul(a);
    timer->end_phase(Phase::forward);
    auto c = b.matmul(a);
    timer->end_phase(Phase::backward);
    timer->end_step();
  }
  const auto times = timer->take_last();
  ASSERT_TRUE(times);
  EXPECT_GT((*times)[Phase::forward], 0.0);
  EXPECT_GT((*times)[Phase::backward], 0.0);
  EXPECT_NEAR((*times)[Phase::forward] + (*times)[Phase::backward], times->step_ms,
              0.05 * times->step_ms);
}

TEST(Gpu, MemoryStatisticsComeFromTheCachingAllocator) {
  SKIP_WITHOUT_GPU();
  const auto before = memory_stats(true, 0);
  auto block = torch::empty({64 * 1024 * 1024}, torch::TensorOptions().device(kGpu));
  const auto during = memory_stats(true, 0);
  EXPECT_GE(during.allocated - before.allocated, 256LL * 1024 * 1024);
  EXPECT_GE(during.reserved, during.allocated);
  EXPECT_GE(during.peak, during.allocated);
}

TEST(Gpu, DataParallelOnTheGpusEqualsOneCpuModel) {
  SKIP_WITHOUT_GPU();
  std::vector<torch::Device> devices;
  for (int64_t d = 0; d < visible_cuda_devices(); ++d) devices.emplace_back(torch::kCUDA, d);
  DataParallel parallel([] { return small_cnn_on(torch::kCPU); }, devices);
  auto reference = small_cnn_on(torch::kCPU);
  torch::manual_seed(3);
  const auto inputs = torch::randn({12, 1, 28, 28});
  const auto targets = torch::randint(0, 10, {12});
  auto out = parallel.forward(inputs, targets);
  parallel.backward();
  parallel.reduce_gradients();
  auto loss = torch::nn::functional::cross_entropy(reference->forward(inputs), targets);
  loss.backward();
  EXPECT_NEAR(out.loss.item<double>(), loss.item<double>(), 1e-4);
  const auto got = parallel.primary()->parameters(), want = reference->parameters();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i].grad().cpu(), want[i].grad(), 1e-3, 1e-5))
        << "gradient " << i;
}

TEST(Gpu, CodecsRoundTripDeviceTensors) {
  SKIP_WITHOUT_GPU();
  CompressionConfig config;
  config.method = CompressionMethod::sort_quant;
  config.bits = 6;
  config.split_bits = 2;
  const auto codec = make_codec(config);
  const auto values = torch::randn({64, 32, 7, 7}, torch::TensorOptions().device(kGpu));
  const auto payload = codec->encode(values);
  EXPECT_TRUE(payload.is_cuda());
  EXPECT_EQ(payload.numel(), codec->encoded_bytes(values.numel()));
  const auto back = codec->decode(payload, values.numel()).view(values.sizes());
  EXPECT_TRUE(back.is_cuda());
  // b = 6 bits within each of 4 groups: at most half a step of the widest group.
  const double range = (values.max() - values.min()).item<double>();
  EXPECT_LE((back - values).abs().max().item<double>(), range / 63.0 / 2.0 + 1e-6);
}

// The device path (tensor ops on the GPU) against the CPU path: the same
// bytes for every way of packing codes, and each decodes the other's payload
// to the same values. ReLU-like values with -0s, and a run of zeros spanning
// several group boundaries, which only indices order.
TEST(Gpu, DeviceCodecsWriteTheCpuPathsBytes) {
  SKIP_WITHOUT_GPU();
  struct Setting {
    CompressionMethod method;
    int bits, split_bits;
    double zero_share;
  };
  const Setting settings[] = {
      {CompressionMethod::uniform, 8, 0, 0.3},     {CompressionMethod::uniform, 4, 0, 0.3},
      {CompressionMethod::uniform, 16, 0, 0.3},    {CompressionMethod::sort_quant, 6, 2, 0.3},
      {CompressionMethod::sort_quant, 3, 1, 0.3},  {CompressionMethod::sort_quant, 9, 3, 0.3},
      {CompressionMethod::sort_quant, 14, 2, 0.3}, {CompressionMethod::sort_quant, 5, 3, 0.9}};
  for (const auto& s : settings) {
    const auto codec = make_codec({s.method, s.bits, s.split_bits});
    SCOPED_TRACE(codec->describe() + ", zeros " + std::to_string(s.zero_share));
    torch::manual_seed(3);
    auto host = torch::randn({4, 32, 56, 57});
    host.masked_fill_(torch::rand(host.sizes()) < s.zero_share, 0.0f);
    host.view({-1}).index_put_({torch::arange(0, host.numel(), 13)}, -0.0f);
    const auto device = host.to(kGpu);

    const auto host_payload = codec->encode(host);
    const auto device_payload = codec->encode(device);
    ASSERT_TRUE(device_payload.is_cuda());
    EXPECT_TRUE(torch::equal(device_payload.cpu(), host_payload)) << "payload bytes differ";
    const auto decoded_on_device = codec->decode(host_payload.to(kGpu), host.numel());
    ASSERT_TRUE(decoded_on_device.is_cuda());
    EXPECT_TRUE(torch::equal(decoded_on_device.cpu(), codec->decode(host_payload, host.numel())))
        << "decoded values differ";
  }
}

}  // namespace
}  // namespace flotilla
