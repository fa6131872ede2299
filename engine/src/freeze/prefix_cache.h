#pragma once
// PipeTransformer's AutoCache: once the leading blocks are frozen they are
// one fixed function of their sample, so their output for each training
// sample is kept and read instead of recomputed. Every sample's output has
// the same shape, so each sample gets a fixed-size slot: the first ones in
// memory up to a byte bound, the rest in an unnamed file (O_TMPFILE) in a
// folder the rank owns (its run folder), gone with the process however it
// ends. Emptied whenever the frozen prefix it caches changes.

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace flotilla {

class PrefixCache {
 public:
  // `samples`: how many sample indices there are (the training split's size);
  // `memory_bytes`: what the in-memory slots may hold; `spill_folder`: where
  // the file of the slots beyond them goes.
  PrefixCache(int64_t samples, int64_t memory_bytes, std::filesystem::path spill_folder);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The leading blocks whose output is cached; changing it drops every slot.
  int64_t blocks() const { return blocks_; }
  void set_blocks(int64_t blocks);

  // The cached outputs of samples `indices` (int64, [B]) stacked in their
  // order, on the CPU; nothing when any of them is not cached.
  std::optional<torch::Tensor> lookup(const torch::Tensor& indices);
  // Keeps `outputs` ([B, ...], any device) as the outputs of `indices`; those
  // already cached are left as they are.
  void store(const torch::Tensor& indices, const torch::Tensor& outputs);

  int64_t cached_samples() const { return filled_; }
  int64_t memory_slots() const { return memory_slots_; }
  int64_t spilled_samples() const { return std::max<int64_t>(0, filled_ - memory_slots_); }

 private:
  void lay_out(const torch::Tensor& one_output);
  void write_file_slot(int64_t file_slot, const torch::Tensor& sample);
  void read_file_slot(int64_t file_slot, torch::Tensor& sample);

  int64_t samples_;
  int64_t memory_bytes_;
  std::filesystem::path spill_folder_;
  int64_t blocks_ = 0;
  // Laid out at the first store after a reset, from that output's shape.
  std::vector<int64_t> sample_shape_;
  torch::ScalarType dtype_ = torch::kFloat32;
  int64_t sample_bytes_ = 0;
  int64_t memory_slots_ = 0;
  torch::Tensor memory_;          // [memory_slots_, sample_shape_...]
  std::vector<int64_t> slot_of_;  // per sample index: its slot, or -1
  int64_t filled_ = 0;            // slots taken, the memory ones first
  int file_ = -1;
};

}  // namespace flotilla
