#pragma once
// The activation codecs written with LibTorch tensor ops only (sort,
// bucketize, gathers, shifts and bitwise ops), so the same code runs on
// whatever device the values live on: on a GPU the payload is made there
// instead of by a round trip through the host. The wire format is the CPU
// path's (activation_codec.h), bit for bit; its tests compare the two.

#include <torch/torch.h>

#include <cstdint>

namespace flotilla::codec {

// `values`: float32, finite (else std::invalid_argument naming the count of
// NaN/Inf), any shape, on any device. bits in 1..16, split_bits in 0..16 (the
// caller, make_codec, has checked them); split_bits 0 is uniform.
torch::Tensor tensor_ops_encode(const torch::Tensor& values, int bits, int split_bits);

// A payload of exactly the encoded size for `numel` values (the caller has
// checked it): `numel` float32 values, 1-d, on the payload's device.
torch::Tensor tensor_ops_decode(const torch::Tensor& payload, int64_t numel, int bits,
                                int split_bits);

}  // namespace flotilla::codec
