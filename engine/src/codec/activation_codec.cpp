#include "codec/activation_codec.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "codec/code_packing.h"
#include "codec/group_quantizer.h"
#include "codec/rank_groups.h"
#include "codec/tensor_codec.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the codec's table is written with memcpy and assumes a little-endian host"
#endif

namespace flotilla {
namespace {

using codec::GroupQuantizer;

// Codes are computed in float32 (twice as fast as double: twice the lanes).
// Its 24-bit mantissa leaves 8 bits below a 16-bit code's unit, so a value
// next to the midpoint of two codes may round to the farther one by a few
// 256ths of a step, never more. Validation allows the same: b 1..16, s 0..16.
constexpr int kMaxValueBits = 16;
constexpr int kMaxSplitBits = 16;  // 2^16 groups: a 512 KiB table already
constexpr int64_t kTableEntryBytes = 2 * sizeof(float);
constexpr int64_t kValuesPerTask = 32 * 1024;

struct ValueRange {
  float min = std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  int64_t non_finite = 0;
};

ValueRange scan_values(const float* values, int64_t count) {
  return at::parallel_reduce(
      0, count, kValuesPerTask, ValueRange{},
      [&](int64_t begin, int64_t end, ValueRange range) {
        for (int64_t i = begin; i < end; ++i) {
          const float x = values[i];
          range.min = x < range.min ? x : range.min;
          range.max = x > range.max ? x : range.max;
          range.non_finite += !(std::fabs(x) <= FLT_MAX);
        }
        return range;
      },
      [](ValueRange a, const ValueRange& b) {
        a.min = std::min(a.min, b.min);
        a.max = std::max(a.max, b.max);
        a.non_finite += b.non_finite;
        return a;
      });
}

void write_table(uint8_t* table, const std::vector<GroupQuantizer>& groups) {
  for (const auto& g : groups) {
    std::memcpy(table, &g.min, sizeof(float));
    std::memcpy(table + sizeof(float), &g.step, sizeof(float));
    table += kTableEntryBytes;
  }
}

torch::Tensor flat_cpu_float(const torch::Tensor& values) {
  if (values.scalar_type() != torch::kFloat)
    throw std::invalid_argument(std::string("activation codec: expects float32 values, got ") +
                                c10::toString(values.scalar_type()));
  return values.to(torch::kCPU).contiguous().reshape({-1});
}

// Everything uniform and sort_quant share: the table-then-codes layout, the
// checks, moving between devices, and decoding (which never needs the ranks).
class QuantizingCodec : public ActivationCodec {
 public:
  QuantizingCodec(int bits, int split_bits) : bits_(bits), split_bits_(split_bits) {}

  // Tensors on another device (a GPU) are encoded there with tensor ops
  // (tensor_codec.h: the same wire format), instead of a round trip through
  // the host; the payload stays on that device, so the caller sends it with
  // the same process group (NCCL) as anything else from it.
  torch::Tensor encode(const torch::Tensor& values) const final {
    if (!values.device().is_cpu()) return codec::tensor_ops_encode(values, bits_, split_bits_);
    const auto flat = flat_cpu_float(values);
    const int64_t count = flat.numel();
    const float* data = flat.data_ptr<float>();
    const ValueRange range = scan_values(data, count);
    if (range.non_finite > 0)
      throw std::invalid_argument("activation codec: " + std::to_string(range.non_finite) + " of " +
                                  std::to_string(count) + " values are NaN or Inf");
    auto payload = torch::empty({encoded_bytes(count)}, torch::kUInt8);
    uint8_t* table = payload.data_ptr<uint8_t>();
    encode_into(data, count, range, table, table + table_bytes());
    return payload.to(values.device());
  }

  torch::Tensor decode(const torch::Tensor& payload, int64_t numel) const final {
    if (numel < 0)
      throw std::invalid_argument("activation codec: negative value count " +
                                  std::to_string(numel));
    if (payload.scalar_type() != torch::kUInt8 || payload.dim() != 1 ||
        payload.numel() != encoded_bytes(numel))
      throw std::invalid_argument("activation codec: a payload for " + std::to_string(numel) +
                                  " values is a 1-d uint8 tensor of " +
                                  std::to_string(encoded_bytes(numel)) + " bytes, got " +
                                  std::to_string(payload.numel()) + " elements of " +
                                  c10::toString(payload.scalar_type()));
    if (!payload.device().is_cpu())
      return codec::tensor_ops_decode(payload, numel, bits_, split_bits_);
    const auto bytes = payload.contiguous();
    const uint8_t* table = bytes.data_ptr<uint8_t>();
    const int64_t groups = int64_t{1} << split_bits_;
    std::vector<double> mins(groups), steps(groups);
    for (int64_t g = 0; g < groups; ++g) {
      float entry[2];
      std::memcpy(entry, table + g * kTableEntryBytes, sizeof entry);
      mins[g] = entry[0];
      steps[g] = entry[1];
    }
    auto values = torch::empty({numel}, torch::kFloat);
    float* out = values.data_ptr<float>();
    const uint8_t* codes = table + table_bytes();
    // In double, so that the one rounding is the final one to float32.
    if (split_bits_ == 0) {
      const double min = mins[0], step = steps[0];
      codec::unpack_codes<kMaxValueBits>(
          codes, numel, bits_, [&](int64_t i, uint32_t code) FLOTILLA_ALWAYS_INLINE {
            out[i] = static_cast<float>(min + static_cast<double>(code) * step);
          });
    } else {
      const int bits = bits_;
      const uint32_t value_mask = (uint32_t{1} << bits) - 1;
      codec::unpack_codes(
          codes, numel, code_bits(), [&](int64_t i, uint32_t code) FLOTILLA_ALWAYS_INLINE {
            const uint32_t group = code >> bits;
            out[i] = static_cast<float>(mins[group] +
                                        static_cast<double>(code & value_mask) * steps[group]);
          });
    }
    return values;
  }

  int64_t encoded_bytes(int64_t numel) const final {
    return table_bytes() + codec::packed_bytes(numel, code_bits());
  }

 protected:
  // Writes the table and the packed codes of `count` finite values.
  virtual void encode_into(const float* values, int64_t count, const ValueRange& range,
                           uint8_t* table, uint8_t* codes) const = 0;

  int code_bits() const { return bits_ + split_bits_; }
  int64_t table_bytes() const { return kTableEntryBytes << split_bits_; }

  void encode_one_group(const float* values, int64_t count, const ValueRange& range, uint8_t* table,
                        uint8_t* codes) const {
    const GroupQuantizer group =
        count > 0 ? GroupQuantizer(range.min, range.max, bits_) : GroupQuantizer();
    write_table(table, {group});
    codec::pack_codes<kMaxValueBits>(codes, count, bits_, [&](int64_t i) FLOTILLA_ALWAYS_INLINE {
      return group.code(values[i]);
    });
  }

  const int bits_, split_bits_;
};

class UniformCodec final : public QuantizingCodec {
 public:
  explicit UniformCodec(int bits) : QuantizingCodec(bits, 0) {}
  std::string describe() const override {
    return "uniform b=" + std::to_string(bits_) + " (" + std::to_string(code_bits()) +
           " bits/value)";
  }

 private:
  void encode_into(const float* values, int64_t count, const ValueRange& range, uint8_t* table,
                   uint8_t* codes) const override {
    encode_one_group(values, count, range, table, codes);
  }
};

class SortQuantCodec final : public QuantizingCodec {
 public:
  SortQuantCodec(int bits, int split_bits) : QuantizingCodec(bits, split_bits) {}
  std::string describe() const override {
    return "sort_quant b=" + std::to_string(bits_) + " s=" + std::to_string(split_bits_) + " (" +
           std::to_string(code_bits()) + " bits/value)";
  }

 private:
  void encode_into(const float* values, int64_t count, const ValueRange& range, uint8_t* table,
                   uint8_t* codes) const override {
    if (split_bits_ == 0) {  // one group: the selection would find the range we already have
      encode_one_group(values, count, range, table, codes);
      return;
    }
    const auto ranks = codec::split_by_rank(values, count, split_bits_);
    std::vector<GroupQuantizer> groups(ranks.min.size());
    for (size_t g = 0; g < groups.size(); ++g)
      groups[g] = GroupQuantizer(ranks.min[g], ranks.max[g], bits_);
    write_table(table, groups);
    const uint64_t* first_key = ranks.first_key.data();
    const int bits = bits_, split_bits = split_bits_;
    codec::pack_codes(codes, count, code_bits(), [&](int64_t i) FLOTILLA_ALWAYS_INLINE {
      const float x = values[i];
      const int64_t g = codec::group_of(first_key, split_bits, codec::rank_key(x, i));
      return static_cast<uint32_t>(g) << bits | groups[g].code(x);
    });
  }
};

}  // namespace

std::unique_ptr<ActivationCodec> make_codec(const CompressionConfig& config) {
  if (config.method == CompressionMethod::none) return nullptr;
  const bool splits = config.method == CompressionMethod::sort_quant;
  const int64_t split_bits = splits ? config.split_bits : 0;
  std::vector<std::string> problems;
  if (config.bits < 1 || config.bits > kMaxValueBits)
    problems.push_back("compression.bits: must be in 1.." + std::to_string(kMaxValueBits) +
                       ", got " + std::to_string(config.bits));
  if (split_bits < 0 || split_bits > kMaxSplitBits)
    problems.push_back("compression.split_bits: must be in 0.." + std::to_string(kMaxSplitBits) +
                       ", got " + std::to_string(split_bits));
  static_assert(kMaxValueBits + kMaxSplitBits <= codec::kMaxCodeWidth);
  if (!problems.empty()) throw ConfigError(std::move(problems));

  const int bits = static_cast<int>(config.bits);
  if (splits) return std::make_unique<SortQuantCodec>(bits, static_cast<int>(split_bits));
  return std::make_unique<UniformCodec>(bits);
}

}  // namespace flotilla
