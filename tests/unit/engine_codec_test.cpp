// Activation codecs: the wire format is read back here by a plain bit reader
// of the test's own, and sort_quant's groups are recomputed with a full stable
// sort, so the codec is checked against the definition rather than itself.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "codec/activation_codec.h"

namespace flotilla {
namespace {

struct Setting {
  CompressionMethod method;
  int64_t bits, split_bits;
};

// e.g. sort_quant_b3_s1: the test's name, and what ctest shows as its parameter.
std::string describe(const Setting& s) {
  if (s.method == CompressionMethod::uniform) return "uniform_b" + std::to_string(s.bits);
  return "sort_quant_b" + std::to_string(s.bits) + "_s" + std::to_string(s.split_bits);
}
void PrintTo(const Setting& s, std::ostream* os) {
  *os << describe(s);
}

std::string setting_name(const ::testing::TestParamInfo<Setting>& info) {
  return describe(info.param);
}

std::unique_ptr<ActivationCodec> codec_for(const Setting& s) {
  return make_codec({s.method, s.bits, s.split_bits});
}

int64_t split_bits_of(const Setting& s) {
  return s.method == CompressionMethod::sort_quant ? s.split_bits : 0;
}

// What a payload says, read one bit at a time.
struct ParsedPayload {
  std::vector<float> mins, steps;
  std::vector<int64_t> groups, value_codes;
};

ParsedPayload parse(const torch::Tensor& payload, int64_t count, int64_t bits, int64_t split_bits) {
  const auto bytes = payload.contiguous();
  const uint8_t* p = bytes.data_ptr<uint8_t>();
  ParsedPayload parsed;
  const int64_t groups = int64_t{1} << split_bits;
  for (int64_t g = 0; g < groups; ++g) {
    float entry[2];
    std::memcpy(entry, p + 8 * g, sizeof entry);
    parsed.mins.push_back(entry[0]);
    parsed.steps.push_back(entry[1]);
  }
  const uint8_t* codes = p + 8 * groups;
  const int64_t width = bits + split_bits;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t code = 0;
    for (int64_t b = 0; b < width; ++b) {
      const int64_t at = i * width + b;
      code |= static_cast<uint64_t>((codes[at / 8] >> (at % 8)) & 1) << b;
    }
    parsed.groups.push_back(static_cast<int64_t>(code >> bits));
    parsed.value_codes.push_back(static_cast<int64_t>(code & ((uint64_t{1} << bits) - 1)));
  }
  return parsed;
}

// Group of every element by the definition: stable rank of its value, then
// ranks [g*n/G, (g+1)*n/G) form group g.
std::vector<int64_t> groups_by_full_sort(const torch::Tensor& values, int64_t split_bits) {
  const auto flat = values.contiguous().reshape({-1});
  const float* x = flat.data_ptr<float>();
  const int64_t n = flat.numel(), groups = int64_t{1} << split_bits;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] < x[b]; });
  std::vector<int64_t> group(n);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = g * n / groups; r < (g + 1) * n / groups; ++r) group[order[r]] = g;
  return group;
}

// Decoding rounds min + code * step to float32: a few ulps of the largest
// magnitude on top of the quantisation error.
double rounding_slack(const torch::Tensor& values) {
  return 4.0 * FLT_EPSILON * values.abs().max().item<double>();
}

// ReLU-like activations: a third exact zeros (ties), the rest spread out.
torch::Tensor activations(std::vector<int64_t> shape, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::relu(torch::randn(shape) + 0.4) * 3.0;
}

const std::vector<Setting> kSettings = {
    {CompressionMethod::uniform, 1, 0},    {CompressionMethod::uniform, 4, 0},
    {CompressionMethod::uniform, 8, 0},    {CompressionMethod::uniform, 12, 0},
    {CompressionMethod::uniform, 16, 0},   {CompressionMethod::sort_quant, 1, 1},
    {CompressionMethod::sort_quant, 3, 1}, {CompressionMethod::sort_quant, 6, 2},
    {CompressionMethod::sort_quant, 9, 3}, {CompressionMethod::sort_quant, 12, 4},
    {CompressionMethod::sort_quant, 5, 0}, {CompressionMethod::sort_quant, 16, 16},
};

class CodecSetting : public ::testing::TestWithParam<Setting> {};

TEST_P(CodecSetting, RoundTripErrorIsWithinHalfAStepOfEachGroup) {
  const auto& setting = GetParam();
  const auto codec = codec_for(setting);
  const int64_t split_bits = split_bits_of(setting);
  torch::manual_seed(11);
  const auto spread = torch::randn({3001}) * 5.0 + 1.0;
  const auto values = torch::cat({spread, activations({5000}, 12)});
  const int64_t n = values.numel();

  const auto decoded = codec->decode(codec->encode(values), n);
  ASSERT_EQ(decoded.sizes(), torch::IntArrayRef({n}));
  ASSERT_EQ(decoded.scalar_type(), torch::kFloat);

  const auto group = groups_by_full_sort(values, split_bits);
  const int64_t groups = int64_t{1} << split_bits;
  std::vector<double> lo(groups, INFINITY), hi(groups, -INFINITY);
  const float* v = values.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    lo[group[i]] = std::min<double>(lo[group[i]], v[i]);
    hi[group[i]] = std::max<double>(hi[group[i]], v[i]);
  }
  const double levels = std::ldexp(1.0, setting.bits) - 1.0;
  const double slack = rounding_slack(values);
  const float* d = decoded.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    const double bound = (hi[group[i]] - lo[group[i]]) / (2.0 * levels) + slack;
    ASSERT_LE(std::abs(static_cast<double>(v[i]) - d[i]), bound)
        << "value " << i << " (" << v[i] << ") in group " << group[i];
  }
}

TEST_P(CodecSetting, PayloadIsTableAndPackedCodesOfExactSize) {
  const auto& setting = GetParam();
  const auto codec = codec_for(setting);
  const int64_t split_bits = split_bits_of(setting);
  const int64_t width = setting.bits + split_bits;
  for (int64_t n : {0, 1, 7, 8, 1000, 1001, 4099}) {
    const int64_t expected = 8 * (int64_t{1} << split_bits) + (n * width + 7) / 8;
    EXPECT_EQ(codec->encoded_bytes(n), expected) << n << " values";
    const auto payload = codec->encode(torch::randn({n}));
    EXPECT_EQ(payload.sizes(), torch::IntArrayRef({expected})) << n << " values";
    EXPECT_EQ(payload.scalar_type(), torch::kUInt8);
  }
}

TEST_P(CodecSetting, ConstantTensorsRoundTripExactly) {
  const auto codec = codec_for(GetParam());
  for (float constant : {0.0f, 3.25f, -1e30f, 1e-40f}) {
    const auto values = torch::full({2, 517}, constant);
    const auto decoded = codec->decode(codec->encode(values), values.numel());
    EXPECT_TRUE(torch::equal(decoded, values.reshape({-1}))) << constant;
  }
}

TEST_P(CodecSetting, EmptyTensorsEncodeToTheTableAlone) {
  const auto codec = codec_for(GetParam());
  for (auto shape : {std::vector<int64_t>{0}, std::vector<int64_t>{4, 0, 3}}) {
    const auto payload = codec->encode(torch::empty(shape));
    EXPECT_EQ(payload.numel(), codec->encoded_bytes(0));
    EXPECT_EQ(codec->decode(payload, 0).numel(), 0);
  }
}

TEST_P(CodecSetting, NanAndInfinityAreRejectedByCount) {
  const auto codec = codec_for(GetParam());
  const auto expect_rejected = [&](const torch::Tensor& values, const std::string& message) {
    try {
      codec->encode(values);
      ADD_FAILURE() << "no exception for " << message;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  auto values = torch::randn({100});
  values[3] = NAN;
  expect_rejected(values, "activation codec: 1 of 100 values are NaN or Inf");
  values[3] = 0.5f;
  values[50] = INFINITY;
  expect_rejected(values, "activation codec: 1 of 100 values are NaN or Inf");
  values[7] = -INFINITY;
  values[8] = NAN;
  expect_rejected(values, "activation codec: 3 of 100 values are NaN or Inf");
}

TEST_P(CodecSetting, NonContiguousInputEncodesLikeItsContiguousCopy) {
  const auto codec = codec_for(GetParam());
  torch::manual_seed(3);
  const auto base = torch::randn({40, 64});
  for (const auto& view :
       {base.t(), base.slice(1, 0, 64, 3), base.transpose(0, 1).slice(0, 1, 33)}) {
    ASSERT_FALSE(view.is_contiguous());
    EXPECT_TRUE(torch::equal(codec->encode(view), codec->encode(view.contiguous())));
  }
}

TEST_P(CodecSetting, PayloadDependsOnValuesInOrderNotOnShape) {
  const auto codec = codec_for(GetParam());
  const auto batch = activations({8, 16, 7, 7}, 5);  // N, C, H, W
  const auto payload = codec->encode(batch);
  EXPECT_TRUE(torch::equal(payload, codec->encode(batch.reshape({-1}))));
  EXPECT_TRUE(torch::equal(payload, codec->encode(batch.reshape({8, 784}))));
  const auto decoded = codec->decode(payload, batch.numel()).reshape(batch.sizes());
  EXPECT_EQ(decoded.sizes(), batch.sizes());
}

TEST_P(CodecSetting, EncodingIsDeterministicWhateverTheThreadCount) {
  const auto codec = codec_for(GetParam());
  const auto values = activations({int64_t{1} << 20}, 9);  // several parallel tasks and chunks
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto single_threaded = codec->encode(values);
  at::set_num_threads(3);
  const auto three_threads = codec->encode(values);
  const auto again = codec->encode(values.clone());
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(single_threaded, three_threads));
  EXPECT_TRUE(torch::equal(three_threads, again));
  const auto decoded = codec->decode(three_threads, values.numel());
  at::set_num_threads(1);
  const auto decoded_single_threaded = codec->decode(three_threads, values.numel());
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(decoded, decoded_single_threaded));
}

TEST_P(CodecSetting, DecodeRejectsAPayloadOfTheWrongSize) {
  const auto codec = codec_for(GetParam());
  const auto payload = codec->encode(torch::randn({100}));
  EXPECT_THROW(codec->decode(payload, 108), std::invalid_argument);  // 8 more: whole bytes more
  EXPECT_THROW(codec->decode(payload.slice(0, 1), 100), std::invalid_argument);
  EXPECT_THROW(codec->decode(payload.to(torch::kInt32), 100), std::invalid_argument);
}

TEST_P(CodecSetting, CudaTensorsComeBackOnTheirDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto codec = codec_for(GetParam());
  const auto values = activations({4, 8, 5, 5}, 4);
  const auto payload = codec->encode(values.cuda());
  EXPECT_TRUE(payload.is_cuda());
  EXPECT_TRUE(torch::equal(payload.cpu(), codec->encode(values)));
  const auto decoded = codec->decode(payload, values.numel());
  EXPECT_TRUE(decoded.is_cuda());
  EXPECT_TRUE(torch::equal(decoded.cpu(), codec->decode(payload.cpu(), values.numel())));
}

INSTANTIATE_TEST_SUITE_P(Codec, CodecSetting, ::testing::ValuesIn(kSettings), setting_name);

class CodecSortQuantGroups : public ::testing::TestWithParam<int64_t> {};

// Ties (repeated values, -0 next to +0) and counts not divisible by 2^s: the
// group ids on the wire are exactly those of the stable-rank definition.
TEST_P(CodecSortQuantGroups, GroupsAreEqualCountByRankWithTiesBrokenByIndex) {
  const int64_t split_bits = GetParam(), bits = 4;
  const auto codec = make_codec({CompressionMethod::sort_quant, bits, split_bits});
  const int64_t groups = int64_t{1} << split_bits;
  torch::manual_seed(21);
  for (int64_t n :
       {groups * 125, groups * 125 + 1, groups * 125 + groups - 1, groups - 1, int64_t{3}}) {
    auto values = torch::randint(-3, 4, {n}).to(torch::kFloat);  // seven values, many ties
    if (n > 10) values.slice(0, 0, n, 5).fill_(-0.0f);
    const auto parsed = parse(codec->encode(values), n, bits, split_bits);

    EXPECT_EQ(parsed.groups, groups_by_full_sort(values, split_bits)) << n << " values";
    std::vector<int64_t> members(groups, 0);
    for (int64_t g : parsed.groups) ++members[g];
    const auto [fewest, most] = std::minmax_element(members.begin(), members.end());
    EXPECT_LE(*most - *fewest, 1) << n << " values";
    EXPECT_EQ(*fewest, n / groups) << n << " values";
  }
}

TEST_P(CodecSortQuantGroups, TableHoldsEachGroupsMinimum) {
  const int64_t split_bits = GetParam(), bits = 6;
  const auto codec = make_codec({CompressionMethod::sort_quant, bits, split_bits});
  const auto values = activations({20011}, 2);
  const auto parsed = parse(codec->encode(values), values.numel(), bits, split_bits);
  std::vector<float> lowest(int64_t{1} << split_bits, INFINITY);
  const float* v = values.data_ptr<float>();
  for (int64_t i = 0; i < values.numel(); ++i)
    lowest[parsed.groups[i]] = std::min(lowest[parsed.groups[i]], v[i]);
  EXPECT_EQ(parsed.mins, lowest);
}

INSTANTIATE_TEST_SUITE_P(Codec, CodecSortQuantGroups, ::testing::Values(1, 2, 3, 4, 7),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return "split_bits_" + std::to_string(info.param);
                         });

// A million values take the selection's finest buckets, and ReLU's zeros fill
// one bucket with ties that several boundaries fall into.
TEST(CodecSortQuant, GroupsOfAMillionActivationsMatchTheFullSort) {
  const int64_t bits = 6, split_bits = 4, n = (int64_t{1} << 20) + 3;
  const auto codec = make_codec({CompressionMethod::sort_quant, bits, split_bits});
  const auto values = torch::relu(activations({n}, 17) - 1.0);  // two thirds zeros
  const auto parsed = parse(codec->encode(values), n, bits, split_bits);
  EXPECT_EQ(parsed.groups, groups_by_full_sort(values, split_bits));
}

TEST(CodecSortQuant, FewerValuesThanGroupsRoundTripExactly) {
  const auto codec = make_codec({CompressionMethod::sort_quant, 3, 4});
  const auto values = torch::tensor({2.5f, -1.0f, 7.0f, 0.125f, 2.5f});
  EXPECT_TRUE(torch::equal(codec->decode(codec->encode(values), 5), values));
}

TEST(CodecFactory, NoneHasNoCodec) {
  EXPECT_EQ(make_codec({CompressionMethod::none, 6, 2}), nullptr);
}

TEST(CodecFactory, DescribesMethodAndBitsPerValue) {
  EXPECT_EQ(make_codec({CompressionMethod::sort_quant, 6, 2})->describe(),
            "sort_quant b=6 s=2 (8 bits/value)");
  EXPECT_EQ(make_codec({CompressionMethod::sort_quant, 3, 1})->describe(),
            "sort_quant b=3 s=1 (4 bits/value)");
  EXPECT_EQ(make_codec({CompressionMethod::uniform, 8, 2})->describe(),
            "uniform b=8 (8 bits/value)");
}

// Every setting validate() lets through (bits 1..16, split_bits 0..16) works.
TEST(CodecFactory, AcceptsEveryValidSetting) {
  const auto values = torch::randn({257});
  for (int64_t bits = 1; bits <= 16; ++bits) {
    for (int64_t split_bits = 0; split_bits <= 16; ++split_bits) {
      const auto codec = make_codec({CompressionMethod::sort_quant, bits, split_bits});
      ASSERT_NE(codec, nullptr);
      EXPECT_EQ(codec->encode(values).numel(), codec->encoded_bytes(257));
    }
    EXPECT_NE(make_codec({CompressionMethod::uniform, bits, 2}), nullptr);
  }
}

TEST(CodecFactory, RejectsImpossibleSettings) {
  const auto problems_of = [](const CompressionConfig& config) {
    try {
      make_codec(config);
    } catch (const ConfigError& e) {
      return e.problems();
    }
    return std::vector<std::string>{};
  };
  EXPECT_EQ(problems_of({CompressionMethod::uniform, 0, 0}),
            std::vector<std::string>{"compression.bits: must be in 1..16, got 0"});
  EXPECT_EQ(problems_of({CompressionMethod::sort_quant, 17, 17}),
            (std::vector<std::string>{"compression.bits: must be in 1..16, got 17",
                                      "compression.split_bits: must be in 0..16, got 17"}));
  EXPECT_EQ(problems_of({CompressionMethod::sort_quant, 6, -1}),
            std::vector<std::string>{"compression.split_bits: must be in 0..16, got -1"});
  // uniform has no groups: its split_bits (the default 2 included) is not looked at
  EXPECT_TRUE(problems_of({CompressionMethod::uniform, 16, 99}).empty());
}

}  // namespace
}  // namespace flotilla
