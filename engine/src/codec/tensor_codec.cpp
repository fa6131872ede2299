#include "codec/tensor_codec.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "codec/code_packing.h"
#include "codec/group_quantizer.h"
#include "codec/rank_groups.h"

namespace flotilla::codec {
namespace {

// On a GPU each op below is one or a few passes over the values, so the work
// is counted in passes: codes stay 32-bit where they fit, byte-aligned and
// sub-byte code widths pack without spreading codes into bits, and decoding
// is one table lookup per value.

constexpr int64_t kTableEntryBytes = 2 * sizeof(float);
// Decoding looks codes up in a table of every code's value up to this width.
constexpr int kMaxLookupWidth = 16;

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

// Every value is finite exactly when the smallest and the largest are (NaN
// propagates through min and max, and sorts last): one check of two values
// instead of a pass over all. The count for the message only on failure.
[[noreturn]] void refuse_non_finite(const torch::Tensor& x) {
  const int64_t non_finite = torch::isfinite(x).logical_not().sum().item<int64_t>();
  throw std::invalid_argument("activation codec: " + std::to_string(non_finite) + " of " +
                              std::to_string(x.numel()) + " values are NaN or Inf");
}

void require_finite(const torch::Tensor& x, const torch::Tensor& lowest,
                    const torch::Tensor& highest) {
  if (!torch::isfinite(torch::stack({lowest.reshape({}), highest.reshape({})})).all().item<bool>())
    refuse_non_finite(x);
}

// GroupQuantizer::code in float32, one op at a time (no fused multiply-add,
// as the CPU path's compiled loop has none): min((x - min) * inverse + 0.5,
// max_code), truncated. `min` and `inverse_step` broadcast against x.
torch::Tensor value_codes(const torch::Tensor& x, const torch::Tensor& min,
                          const torch::Tensor& inverse_step, int bits,
                          torch::ScalarType code_type) {
  const float max_code = static_cast<float>((int64_t{1} << bits) - 1);
  const auto scaled = (x - min) * inverse_step + 0.5f;
  return scaled.clamp_max(max_code).to(code_type);
}

// 32-bit codes unless a code needs all 32 bits (int32 is signed).
torch::ScalarType code_type_for(int width) {
  return width < 32 ? torch::kInt : torch::kLong;
}

// Codes of `width` bits, LSB-first in element order, no padding between codes.
torch::Tensor pack(const torch::Tensor& codes, int width) {
  const int64_t count = codes.numel();
  const int64_t bytes = packed_bytes(count, width);
  if (width % 8 == 0) {  // each code is width/8 whole bytes, low byte first
    const int code_bytes = width / 8;
    if (code_bytes == 1) return codes.to(torch::kUInt8);
    const auto shifts = torch::arange(0, width, 8, codes.options());
    return codes.unsqueeze(1)
        .bitwise_right_shift(shifts)
        .bitwise_and(0xff)
        .to(torch::kUInt8)
        .reshape({-1});
  }
  if (8 % width == 0) {  // 8/width whole codes a byte, the first in the low bits
    const int64_t per_byte = 8 / width;
    auto padded = codes;
    if (bytes * per_byte > count)
      padded = torch::cat({codes, torch::zeros({bytes * per_byte - count}, codes.options())});
    const auto shifts = torch::arange(0, 8, width, codes.options());
    return padded.reshape({bytes, per_byte})
        .bitwise_left_shift(shifts)
        .sum(torch::IntArrayRef{1}, false, torch::kUInt8);
  }
  // Any other width: each code becomes its `width` bits, the bit stream is cut into bytes.
  const auto shifts = torch::arange(width, codes.options());
  auto bits = codes.unsqueeze(1).bitwise_right_shift(shifts).bitwise_and(1).to(torch::kUInt8);
  bits = bits.reshape({-1});
  const int64_t padding = bytes * 8 - bits.numel();
  if (padding > 0) bits = torch::cat({bits, torch::zeros({padding}, bits.options())});
  const auto byte_shifts = torch::arange(8, bits.options());
  return bits.reshape({bytes, 8})
      .bitwise_left_shift(byte_shifts)
      .sum(torch::IntArrayRef{1}, false, torch::kUInt8);
}

torch::Tensor unpack(const torch::Tensor& packed, int64_t count, int width) {
  const auto code_options = packed.options().dtype(code_type_for(width));
  if (width % 8 == 0) {
    const int code_bytes = width / 8;
    const auto bytes = packed.slice(0, 0, count * code_bytes).to(code_type_for(width));
    if (code_bytes == 1) return bytes;
    const auto shifts = torch::arange(0, width, 8, code_options);
    return bytes.reshape({count, code_bytes})
        .bitwise_left_shift(shifts)
        .sum(torch::IntArrayRef{1}, false, code_type_for(width));
  }
  if (8 % width == 0) {
    const auto shifts = torch::arange(0, 8, width, code_options);
    return packed.to(code_type_for(width))
        .unsqueeze(1)
        .bitwise_right_shift(shifts)
        .bitwise_and((1 << width) - 1)
        .reshape({-1})
        .slice(0, 0, count);
  }
  const auto byte_shifts = torch::arange(8, packed.options());
  auto bits = packed.unsqueeze(1).bitwise_right_shift(byte_shifts).bitwise_and(1).reshape({-1});
  bits = bits.slice(0, 0, count * width).reshape({count, width}).to(code_type_for(width));
  const auto shifts = torch::arange(width, code_options);
  return bits.bitwise_left_shift(shifts).sum(torch::IntArrayRef{1}, false, code_type_for(width));
}

// Ranks ordered as (value, index): a 64-bit key whose signed order is that
// order, for finite float32 values without -0 (see rank_groups.h's rank_key).
torch::Tensor rank_keys(const torch::Tensor& values, const torch::Tensor& indices) {
  const auto bits = values.contiguous().view(torch::kInt);
  // Negative floats order backwards as integers: flip their magnitude bits.
  const auto ordered = bits.bitwise_xor(bits.bitwise_right_shift(31).bitwise_and(0x7fffffff));
  return ordered.to(torch::kLong) * (int64_t{1} << 32) + indices;
}

// The group of each value by rank, groups of equal count (rank_groups.h):
// group g starts at the element of rank first[g], whose value and index are
// boundary_values[g-1] and boundary_indices[g-1]. By value alone, counting the
// boundaries at or below a value is one binary search each; only values equal
// to a boundary's value depend on their index, and those are looked up again
// by (value, index).
torch::Tensor groups_by_rank(const torch::Tensor& y, const torch::Tensor& boundary_values,
                             const torch::Tensor& boundary_indices) {
  auto group = torch::bucketize(y, boundary_values, /*out_int32=*/true, /*right=*/true);
  // NaN before the boundaries: a value below every boundary matches nothing.
  const auto nan = torch::full({1}, std::numeric_limits<float>::quiet_NaN(), y.options());
  const auto highest_boundary_at_or_below =
      torch::cat({nan, boundary_values}).index_select(0, group);
  const auto tied = torch::nonzero(y == highest_boundary_at_or_below).reshape({-1});
  if (tied.numel() == 0) return group;
  const auto tied_keys = rank_keys(y.index_select(0, tied), tied);
  const auto boundary_keys = rank_keys(boundary_values, boundary_indices);
  return group.index_copy_(
      0, tied, torch::bucketize(tied_keys, boundary_keys, /*out_int32=*/true, /*right=*/true));
}

// ---- Encoding through a table of thresholds (few groups and codes) ----
//
// Within a group a value's code only grows with the value, so each code c >= 1
// of group g starts at one float: the smallest whose code is at least c,
// found on the host by bisection with the CPU path's own GroupQuantizer::code.
// Laid out in value order between the groups' first values, these thresholds
// make encoding one binary search a value (bucketize) and one lookup of the
// code its bucket stands for, where computing codes takes nine passes.
constexpr int64_t kMaxTableThresholds = 1024;
// The bucket of the values equal to a group boundary stands for ~r (< 0), r
// the run of boundaries of that value: their group depends on their index.

// The smallest float in (low, high] whose code is at least `code` (>= 1), or
// +inf where none is. code(low) is 0: low is the group's minimum.
float threshold(const GroupQuantizer& q, float low, float high, uint32_t code) {
  if (q.code(high) < code) return std::numeric_limits<float>::infinity();
  uint32_t below = order_key(low), at = order_key(high);  // code(below) < code <= code(at)
  while (at - below > 1) {
    const uint32_t middle = below + (at - below) / 2;
    (q.code(from_order_key(middle)) >= code ? at : below) = middle;
  }
  return from_order_key(at);
}

struct ThresholdTable {
  std::vector<float> entries;         // non-decreasing
  std::vector<int32_t> bucket_codes;  // entries + 1: the code of a value with k entries <= it
  // Runs of boundaries of equal value, r = 0, 1, ...: boundary g >= 1's run
  // (at g - 1), each run's first group, and the code of its value in the
  // group before it (where a tied value may also fall; in the run's groups
  // it is their minimum, code 0).
  std::vector<int32_t> run_of_boundary, run_first_group, run_code_below;
};

// Group g holds the values from lowest[g] to highest[g]; groups after the
// first start at a boundary value. Boundaries of equal value (a run of ties
// spanning whole groups) count once: the groups between them hold only that
// value, and a value above it belongs to the run's last group.
ThresholdTable threshold_table(const std::vector<GroupQuantizer>& quantizers,
                               const std::vector<float>& lowest, const std::vector<float>& highest,
                               int bits) {
  const int64_t groups = static_cast<int64_t>(quantizers.size());
  const uint32_t max_code = (uint32_t{1} << bits) - 1;
  ThresholdTable table;
  table.bucket_codes.push_back(0);  // below every entry: group 0, code 0
  const auto add = [&](float entry, int32_t code_above) {
    table.entries.push_back(entry);
    table.bucket_codes.push_back(code_above);
  };
  const auto add_thresholds = [&](int64_t group, float ceiling) {
    for (uint32_t c = 1; c <= max_code; ++c)
      add(std::min(threshold(quantizers[group], lowest[group], highest[group], c), ceiling),
          static_cast<int32_t>((group << bits) | c));
  };
  int64_t current = 0;
  for (int64_t first = 1, run = 0; first < groups; ++run) {
    const float boundary = lowest[first];
    int64_t last = first;
    while (last + 1 < groups && lowest[last + 1] == boundary) ++last;
    add_thresholds(current, boundary);
    add(boundary, static_cast<int32_t>(~run));
    add(std::nextafter(boundary, std::numeric_limits<float>::infinity()),
        static_cast<int32_t>(last << bits));
    table.run_of_boundary.insert(table.run_of_boundary.end(), last - first + 1,
                                 static_cast<int32_t>(run));
    table.run_first_group.push_back(static_cast<int32_t>(first));
    table.run_code_below.push_back(
        static_cast<int32_t>(((first - 1) << bits) | quantizers[first - 1].code(boundary)));
    current = last;
    first = last + 1;
  }
  add_thresholds(current, std::numeric_limits<float>::infinity());
  return table;
}

// Host values to the device in one copy, a copy of their own. To a GPU from
// pinned memory without waiting: a copy from pageable memory first waits for
// all the work queued before it.
template <class T>
torch::Tensor to_device(const std::vector<T>& values, torch::ScalarType type,
                        const torch::Device& device) {
  const auto host =
      torch::from_blob(const_cast<T*>(values.data()), {static_cast<int64_t>(values.size())}, type);
  if (!device.is_cuda()) return host.to(device, /*non_blocking=*/false, /*copy=*/true);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

template <class T>
void append_words(std::vector<int32_t>& words, const std::vector<T>& values) {
  static_assert(sizeof(T) == sizeof(int32_t));
  const size_t at = words.size();
  words.resize(at + values.size());
  std::memcpy(words.data() + at, values.data(), values.size() * sizeof(T));
}

// The payload from the groups' extremes (host) and the values (device):
// the table of (min, step), then the codes, found through the threshold
// table; values tied with a boundary get their group from their rank key.
// boundary_indices: the index of each boundary's value (int64, groups - 1).
torch::Tensor encode_by_thresholds(const torch::Tensor& x, const torch::Tensor& y,
                                   const std::vector<float>& lowest,
                                   const std::vector<float>& highest,
                                   const torch::Tensor& boundary_indices, int bits, int width) {
  const int64_t groups = static_cast<int64_t>(lowest.size());
  std::vector<GroupQuantizer> quantizers;
  std::vector<float> table_floats;
  for (int64_t g = 0; g < groups; ++g) {
    quantizers.emplace_back(lowest[g], highest[g], bits);
    table_floats.insert(table_floats.end(), {quantizers[g].min, quantizers[g].step});
  }
  const auto table = threshold_table(quantizers, lowest, highest, bits);
  // One copy to the device: the payload's table, the thresholds, the codes
  // of their buckets, and the runs of tied boundaries.
  std::vector<int32_t> words;
  append_words(words, table_floats);
  append_words(words, table.entries);
  append_words(words, table.bucket_codes);
  append_words(words, table.run_of_boundary);
  append_words(words, table.run_first_group);
  append_words(words, table.run_code_below);
  const auto on_device = to_device(words, torch::kInt, x.device());
  int64_t at = 0;
  const auto next = [&](int64_t count) {
    const auto part = on_device.slice(0, at, at + count);
    at += count;
    return part;
  };
  const auto payload_table = next(2 * groups).view(torch::kUInt8);
  const auto entries = next(static_cast<int64_t>(table.entries.size())).view(torch::kFloat);
  const auto bucket_codes = next(static_cast<int64_t>(table.bucket_codes.size()));
  const auto run_of_boundary = next(static_cast<int64_t>(table.run_of_boundary.size()));
  const auto run_first_group = next(static_cast<int64_t>(table.run_first_group.size()));
  const auto run_code_below = next(static_cast<int64_t>(table.run_code_below.size()));

  auto codes = bucket_codes.index_select(
      0, torch::bucketize(y, entries, /*out_int32=*/true, /*right=*/true));
  if (groups > 1) {
    const auto tied = torch::nonzero(codes < 0).reshape({-1});
    if (tied.numel() > 0) {
      // A tied value's group: the boundaries of earlier runs, and those of its
      // own run at or before its index (rank order within equal values). As
      // one key, run * count + index against the boundaries' alike.
      const int64_t count = x.numel();
      const auto run = codes.index_select(0, tied).bitwise_not();
      const auto boundary_keys = run_of_boundary.to(torch::kLong) * count + boundary_indices;
      const auto group = torch::bucketize(run.to(torch::kLong) * count + tied, boundary_keys,
                                          /*out_int32=*/true, /*right=*/true);
      codes.index_copy_(
          0, tied,
          torch::where(group < run_first_group.index_select(0, run),
                       run_code_below.index_select(0, run), group.bitwise_left_shift(bits)));
    }
  }
  return torch::cat({payload_table, pack(codes, width)});
}

}  // namespace

torch::Tensor tensor_ops_encode(const torch::Tensor& values, int bits, int split_bits) {
  if (values.scalar_type() != torch::kFloat)
    throw std::invalid_argument(std::string("activation codec: expects float32 values, got ") +
                                c10::toString(values.scalar_type()));
  torch::NoGradGuard no_grad;
  const auto x = values.contiguous().reshape({-1});
  const int64_t count = x.numel();
  const int64_t groups = int64_t{1} << split_bits;
  const auto float_options = x.options();
  const int width = bits + split_bits;
  const auto code_type = code_type_for(width);

  if (count == 0) {  // every group empty: (0, 0) entries, no codes
    const auto zeros = torch::zeros({groups}, float_options);
    return table_bytes({zeros, zeros, zeros});
  }
  const bool thresholds_fit = groups * ((int64_t{1} << bits) - 1) <= kMaxTableThresholds;
  if (split_bits == 0) {
    const auto [lowest, highest] = torch::aminmax(x);
    if (thresholds_fit) {
      const auto extremes = torch::stack({lowest, highest}).cpu();
      const float low = extremes[0].item<float>(), high = extremes[1].item<float>();
      if (!std::isfinite(low) || !std::isfinite(high)) refuse_non_finite(x);
      return encode_by_thresholds(x, x, {low}, {high}, torch::Tensor(), bits, width);
    }
    require_finite(x, lowest, highest);
    // +0 for a -0 minimum, as the CPU path sends.
    const auto q = quantizers(lowest.reshape({1}) + 0.0f, highest.reshape({1}), bits);
    return torch::cat(
        {table_bytes(q), pack(value_codes(x, q.min, q.inverse_step, bits, code_type), width)});
  }
  if (count > kMaxRankedValues)
    throw std::invalid_argument("activation codec: sort_quant ranks at most " +
                                std::to_string(kMaxRankedValues) + " values, got " +
                                std::to_string(count));

  // Rank order is (value, index), -0 tied with +0: a stable sort of x + 0.
  const auto y = x + 0.0f;
  const auto [sorted, order] = torch::sort(y, c10::optional<bool>(true), /*dim=*/0);

  // Group g holds ranks [g*count/G, (g+1)*count/G); an empty group (fewer
  // values than groups) starts where its successor does.
  std::vector<int64_t> first(groups), last(groups);
  std::vector<uint8_t> empty_group(groups);
  for (int64_t g = 0; g < groups; ++g) {
    first[g] = g * count / groups;
    const int64_t last_of_group = (g + 1) * count / groups - 1;
    empty_group[g] = last_of_group < first[g];
    last[g] = std::max<int64_t>(last_of_group, 0);
  }
  const auto device = float_options.device();
  std::vector<int64_t> first_then_last = first;
  first_then_last.insert(first_then_last.end(), last.begin(), last.end());
  const auto ranks = to_device(first_then_last, torch::kLong, device);
  const auto first_rank = ranks.slice(0, 0, groups);
  const auto last_rank = ranks.slice(0, groups);
  const auto boundary_ranks = first_rank.slice(0, 1);
  const auto boundary_indices = order.index_select(0, boundary_ranks);

  const bool no_empty_group = count >= groups;
  if (thresholds_fit && no_empty_group) {
    // The groups' extremes to the host in one copy; the smallest and the
    // largest value among them tell whether all are finite.
    const auto extremes = sorted.index_select(0, ranks).cpu();
    const float* e = extremes.data_ptr<float>();
    const std::vector<float> lowest(e, e + groups), highest(e + groups, e + 2 * groups);
    if (!std::isfinite(lowest.front()) || !std::isfinite(highest.back())) refuse_non_finite(x);
    return encode_by_thresholds(x, y, lowest, highest, boundary_indices, bits, width);
  }

  require_finite(x, sorted[0], sorted[count - 1]);
  const auto empty = torch::tensor(empty_group).to(torch::kBool).to(device);
  const auto zero = torch::zeros({groups}, float_options);
  const auto lowest = torch::where(empty, zero, sorted.index_select(0, first_rank));
  const auto highest = torch::where(empty, zero, sorted.index_select(0, last_rank));
  const auto q = quantizers(lowest, highest, bits);

  const auto group = groups_by_rank(y, sorted.index_select(0, boundary_ranks), boundary_indices);
  const auto codes = group.to(code_type).bitwise_left_shift(bits) |
                     value_codes(x, q.min.index_select(0, group),
                                 q.inverse_step.index_select(0, group), bits, code_type);
  return torch::cat({table_bytes(q), pack(codes, width)});
}

torch::Tensor tensor_ops_decode(const torch::Tensor& payload, int64_t numel, int bits,
                                int split_bits) {
  torch::NoGradGuard no_grad;
  const int64_t groups = int64_t{1} << split_bits;
  const int64_t table = kTableEntryBytes * groups;
  const int width = bits + split_bits;
  const auto bytes = payload.contiguous();
  const auto entries =
      bytes.slice(0, 0, table).view(torch::kFloat).reshape({groups, 2}).to(torch::kDouble);
  const auto mins = entries.select(1, 0), steps = entries.select(1, 1);
  if (numel == 0) return torch::empty({0}, bytes.options().dtype(torch::kFloat));
  const auto codes = unpack(bytes.slice(0, table), numel, width);
  // In double, min + code * step, rounded once to float32 as the CPU path does.
  const auto value_of = [&](const torch::Tensor& code) {
    const auto value = code.bitwise_and((int64_t{1} << bits) - 1).to(torch::kDouble);
    const auto group = code.bitwise_right_shift(bits).to(torch::kLong);
    return (mins.index_select(0, group) + value * steps.index_select(0, group)).to(torch::kFloat);
  };
  if (width > kMaxLookupWidth) return value_of(codes);
  // Every code's value once, then one lookup per value.
  const auto every_code = torch::arange(int64_t{1} << width, codes.options());
  return value_of(every_code).index_select(0, codes);
}

}  // namespace flotilla::codec
