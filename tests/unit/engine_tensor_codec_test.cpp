// The codecs written as tensor ops (the path a GPU takes) against the CPU
// path: the same payload bytes, and each side decodes the other's payload to
// identical values. Run here on CPU tensors; the same code runs on CUDA ones.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

#include "codec/activation_codec.h"
#include "codec/tensor_codec.h"

namespace flotilla {
namespace {

struct TensorCodecCase {
  std::string name;
  int bits, split_bits;  // split_bits 0: uniform
  std::vector<int64_t> shape;
};

// What ctest lists beside the test's name: the case's name, not its bytes.
void PrintTo(const TensorCodecCase& c, std::ostream* out) {
  *out << c.name;
}

class TensorOpsCodec : public ::testing::TestWithParam<TensorCodecCase> {};

TEST_P(TensorOpsCodec, EncodesTheCpuPathsBytesAndDecodesBothWaysIdentically) {
  const auto& c = GetParam();
  const auto method =
      c.split_bits == 0 ? CompressionMethod::uniform : CompressionMethod::sort_quant;
  const auto codec = make_codec({method, c.bits, c.split_bits});
  torch::manual_seed(11);
  // ReLU-like: a third exact zeros (ties across group boundaries), a few -0.
  auto values = torch::relu(torch::randn(c.shape) + 0.4);
  values.view({-1}).index_put_({torch::arange(0, values.numel(), 97)}, -0.0f);

  const auto cpu_payload = codec->encode(values);
  const auto tensor_payload = codec::tensor_ops_encode(values, c.bits, c.split_bits);
  ASSERT_EQ(tensor_payload.scalar_type(), torch::kUInt8);
  ASSERT_EQ(tensor_payload.numel(), codec->encoded_bytes(values.numel()));
  EXPECT_TRUE(torch::equal(tensor_payload, cpu_payload)) << "payload bytes differ";

  const auto cpu_decoded = codec->decode(tensor_payload, values.numel());
  const auto tensor_decoded =
      codec::tensor_ops_decode(cpu_payload, values.numel(), c.bits, c.split_bits);
  EXPECT_TRUE(torch::equal(tensor_decoded, cpu_decoded)) << "decoded values differ";
  // And the values are a quantisation of the input, not something both got wrong alike.
  EXPECT_LT((tensor_decoded - values.reshape({-1})).abs().max().item<double>(),
            (values.max() - values.min()).item<double>() / ((1 << c.bits) - 1));
}

// The seed's MobileNetV2 boundary tensors per micro-batch are [32,32,112,112]
// and [32,1280,7,7]; a 2-sample slice of each keeps the test quick (the full
// shapes run in codec_bench).
INSTANTIATE_TEST_SUITE_P(
    Shapes, TensorOpsCodec,
    ::testing::Values(TensorCodecCase{"uniform_b8_seed_boundary_slice", 8, 0, {2, 32, 112, 112}},
                      TensorCodecCase{"uniform_b4_odd_count", 4, 0, {3, 5, 7}},
                      TensorCodecCase{"uniform_b16", 16, 0, {64, 33}},
                      TensorCodecCase{
                          "sort_quant_b6_s2_seed_boundary_slice", 6, 2, {2, 32, 112, 112}},
                      TensorCodecCase{"sort_quant_b6_s2_seed_head_slice", 6, 2, {2, 1280, 7, 7}},
                      TensorCodecCase{"sort_quant_b3_s1_odd_count", 3, 1, {3, 5, 7}},
                      TensorCodecCase{"sort_quant_b9_s3", 9, 3, {16, 24, 24}},
                      TensorCodecCase{"sort_quant_b2_s4_fewer_values_than_groups", 2, 4, {5}},
                      TensorCodecCase{"sort_quant_b12_s4", 12, 4, {4097}},
                      // Each way of packing: 1, 2 and 4-bit codes share bytes,
                      // 8, 16, 24 and 32-bit codes are whole bytes, others cross bytes.
                      TensorCodecCase{"uniform_b1_odd_count", 1, 0, {1001}},
                      TensorCodecCase{"uniform_b2_odd_count", 2, 0, {1003}},
                      TensorCodecCase{"sort_quant_b14_s2_two_byte_codes", 14, 2, {3, 700}},
                      TensorCodecCase{"sort_quant_b16_s8_three_byte_codes", 16, 8, {9000}},
                      TensorCodecCase{"sort_quant_b16_s16_four_byte_codes", 16, 16, {70001}}),
    [](const ::testing::TestParamInfo<TensorCodecCase>& info) { return info.param.name; });

// Nine values in ten zero, signs mixed: the first seven of eight group
// boundaries fall inside one run of ties, which only the indices order.
TEST(TensorOpsCodec, GroupsARunOfTiesSpanningSeveralGroupsByIndex) {
  const auto codec = make_codec({CompressionMethod::sort_quant, 5, 3});
  torch::manual_seed(5);
  auto values = torch::randn({10007});
  values.masked_fill_(torch::rand({10007}) < 0.9, 0.0f);
  values.view({-1}).index_put_(
      {torch::arange(1, values.numel(), 3)},
      values.view({-1}).index({torch::arange(1, values.numel(), 3)}) * -1.0f);
  values.view({-1}).index_put_({torch::arange(0, values.numel(), 7)}, -0.0f);

  const auto payload = codec::tensor_ops_encode(values, 5, 3);
  EXPECT_TRUE(torch::equal(payload, codec->encode(values))) << "payload bytes differ";
  EXPECT_TRUE(torch::equal(codec::tensor_ops_decode(payload, values.numel(), 5, 3),
                           codec->decode(payload, values.numel())));
}

TEST(TensorOpsCodec, RefusesNonFiniteValuesByCount) {
  auto values = torch::zeros({10});
  values[3] = std::numeric_limits<float>::quiet_NaN();
  values[7] = std::numeric_limits<float>::infinity();
  try {
    codec::tensor_ops_encode(values, 8, 2);
    FAIL() << "encoded NaN and Inf";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("2 of 10 values are NaN or Inf"), std::string::npos)
        << e.what();
  }
}

TEST(TensorOpsCodec, EmptyTensorsEncodeAsTheCpuPathDoes) {
  const auto codec = make_codec({CompressionMethod::sort_quant, 6, 2});
  const auto empty = torch::empty({0});
  EXPECT_TRUE(torch::equal(codec::tensor_ops_encode(empty, 6, 2), codec->encode(empty)));
  EXPECT_EQ(codec::tensor_ops_decode(codec->encode(empty), 0, 6, 2).numel(), 0);
}

}  // namespace
}  // namespace flotilla
