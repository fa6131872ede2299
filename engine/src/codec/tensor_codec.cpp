#include "codec/tensor_codec.h"

#include <cfloat>
#include <limits>
#include <stdexcept>
#include <string>

#include "codec/code_packing.h"
#include "codec/rank_groups.h"

namespace flotilla::codec {
namespace {

constexpr int64_t kTableEntryBytes = 2 * sizeof(float);

// Per group, what GroupQuantizer (activation_codec.cpp) computes, as tensors:
// step = min((max - min) / max_code, FLT_MAX) in double, rounded to float;
// inverse_step = min(1 / step, FLT_MAX) in double, rounded, 0 when step is 0.
struct Quantizers {
  torch::Tensor min, step, inverse_step;  // float32, one per group
};

Quantizers quantizers(const torch::Tensor& lowest, const torch::Tensor& highest, int bits) {
  const double max_code = static_cast<double>((int64_t{1} << bits) - 1);
  const auto low = lowest.to(torch::kDouble);
  const auto exact_step = (highest.to(torch::kDouble) - low) / max_code;
  const auto step = exact_step.clamp_max(FLT_MAX).to(torch::kFloat);
  const auto inverse = (1.0 / step.to(torch::kDouble)).clamp_max(FLT_MAX).to(torch::kFloat);
  return {lowest.to(torch::kFloat), step,
          torch::where(step > 0, inverse, torch::zeros_like(inverse))};
}

// The table's bytes: (float min, float step) per group, little-endian as the
// device stores floats.
torch::Tensor table_bytes(const Quantizers& q) {
  return torch::stack({q.min, q.step}, 1).contiguous().view(torch::kUInt8).reshape({-1});
}

// GroupQuantizer::code in float32, one op at a time (no fused multiply-add,
// as the CPU path's compiled loop has none): min((x - min) * inverse + 0.5,
// max_code), truncated.
torch::Tensor value_codes(const torch::Tensor& x, const torch::Tensor& min,
                          const torch::Tensor& inverse_step, int bits) {
  const float max_code = static_cast<float>((int64_t{1} << bits) - 1);
  const auto scaled = (x - min) * inverse_step + 0.5f;
  return scaled.clamp_max(max_code).to(torch::kInt64);
}

// Codes of `width` bits, LSB-first in element order, no padding between codes:
// each code becomes its `width` bits, the bit stream is cut into bytes.
torch::Tensor pack(const torch::Tensor& codes, int width) {
  // 32-bit lanes where the codes fit: half the memory of the [count, width] bits.
  const auto narrow = width < 32 ? codes.to(torch::kInt) : codes;
  const auto shifts = torch::arange(width, narrow.options());
  auto bits = narrow.unsqueeze(1).bitwise_right_shift(shifts).bitwise_and(1).to(torch::kUInt8);
  bits = bits.reshape({-1});
  const int64_t bytes = packed_bytes(codes.numel(), width);
  const int64_t padding = bytes * 8 - bits.numel();
  if (padding > 0) bits = torch::cat({bits, torch::zeros({padding}, bits.options())});
  const auto byte_shifts = torch::arange(8, bits.options());
  return bits.reshape({bytes, 8})
      .bitwise_left_shift(byte_shifts)
      .sum(torch::IntArrayRef{1}, false, torch::kUInt8);
}

torch::Tensor unpack(const torch::Tensor& packed, int64_t count, int width) {
  const auto byte_shifts = torch::arange(8, packed.options());
  auto bits = packed.unsqueeze(1).bitwise_right_shift(byte_shifts).bitwise_and(1).reshape({-1});
  bits = bits.slice(0, 0, count * width).reshape({count, width}).to(torch::kInt64);
  const auto shifts = torch::arange(width, bits.options());
  return bits.bitwise_left_shift(shifts).sum(torch::IntArrayRef{1});
}

}  // namespace

torch::Tensor tensor_ops_encode(const torch::Tensor& values, int bits, int split_bits) {
  if (values.scalar_type() != torch::kFloat)
    throw std::invalid_argument(std::string("activation codec: expects float32 values, got ") +
                                c10::toString(values.scalar_type()));
  torch::NoGradGuard no_grad;
  const auto x = values.contiguous().reshape({-1});
  const int64_t count = x.numel();
  const int64_t non_finite = torch::isfinite(x).logical_not().sum().item<int64_t>();
  if (non_finite > 0)
    throw std::invalid_argument("activation codec: " + std::to_string(non_finite) + " of " +
                                std::to_string(count) + " values are NaN or Inf");
  const int64_t groups = int64_t{1} << split_bits;
  const auto float_options = x.options();
  const int width = bits + split_bits;

  if (count == 0) {  // every group empty: (0, 0) entries, no codes
    const auto zeros = torch::zeros({groups}, float_options);
    return table_bytes({zeros, zeros, zeros});
  }
  if (split_bits == 0) {
    const auto q = quantizers(x.min().reshape({1}) + 0.0f, x.max().reshape({1}), bits);
    return torch::cat({table_bytes(q), pack(value_codes(x, q.min, q.inverse_step, bits), width)});
  }
  if (count > kMaxRankedValues)
    throw std::invalid_argument("activation codec: sort_quant ranks at most " +
                                std::to_string(kMaxRankedValues) + " values, got " +
                                std::to_string(count));

  // Rank order is (value, index), -0 tied with +0: a stable sort of x + 0.
  const auto [sorted, order] = torch::sort(x + 0.0f, c10::optional<bool>(true), /*dim=*/0);
  const auto long_options = float_options.dtype(torch::kLong);
  // Group g holds ranks [g*count/G, (g+1)*count/G); an empty group's first
  // rank equals its successor's, so rank r belongs to the last group whose
  // first rank is <= r: bucketize counts those boundaries.
  const auto first_rank = (torch::arange(groups + 1, long_options) * count).div(groups, "floor");
  const auto ranks = torch::arange(count, long_options);
  const auto group_of_rank =
      torch::bucketize(ranks, first_rank.slice(0, 1, groups), /*out_int32=*/false, /*right=*/true);

  const auto last_rank = first_rank.slice(0, 1) - 1;
  const auto first = first_rank.slice(0, 0, groups);
  const auto empty = last_rank < first;
  const auto zero = torch::zeros({groups}, float_options);
  const auto lowest = torch::where(empty, zero, sorted.index({first.clamp_max(count - 1)}));
  const auto highest = torch::where(empty, zero, sorted.index({last_rank.clamp_min(0)}));
  const auto q = quantizers(lowest, highest, bits);

  const auto in_rank_order = x.index({order});
  const auto codes_by_rank = group_of_rank.bitwise_left_shift(bits) |
                             value_codes(in_rank_order, q.min.index({group_of_rank}),
                                         q.inverse_step.index({group_of_rank}), bits);
  const auto codes = torch::empty_like(codes_by_rank).scatter_(0, order, codes_by_rank);
  return torch::cat({table_bytes(q), pack(codes, width)});
}

torch::Tensor tensor_ops_decode(const torch::Tensor& payload, int64_t numel, int bits,
                                int split_bits) {
  torch::NoGradGuard no_grad;
  const int64_t groups = int64_t{1} << split_bits;
  const int64_t table = kTableEntryBytes * groups;
  const auto bytes = payload.contiguous();
  const auto entries =
      bytes.slice(0, 0, table).view(torch::kFloat).reshape({groups, 2}).to(torch::kDouble);
  const auto mins = entries.select(1, 0), steps = entries.select(1, 1);
  if (numel == 0) return torch::empty({0}, bytes.options().dtype(torch::kFloat));
  const auto codes = unpack(bytes.slice(0, table), numel, bits + split_bits);
  const auto value = codes.bitwise_and((int64_t{1} << bits) - 1).to(torch::kDouble);
  const auto group = codes.bitwise_right_shift(bits);
  // In double, min + code * step, rounded once to float32 as the CPU path does.
  return (mins.index({group}) + value * steps.index({group})).to(torch::kFloat);
}

}  // namespace flotilla::codec
