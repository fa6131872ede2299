#include "freeze/prefix_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace flotilla {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

PrefixCache::PrefixCache(int64_t samples, int64_t memory_bytes, std::filesystem::path spill_folder)
    : samples_(samples),
      memory_bytes_(memory_bytes),
      spill_folder_(std::move(spill_folder)),
      slot_of_(static_cast<size_t>(samples), -1) {}

PrefixCache::~PrefixCache() {
  if (file_ >= 0) ::close(file_);
}

void PrefixCache::set_blocks(int64_t blocks) {
  if (blocks == blocks_) return;
  blocks_ = blocks;
  std::fill(slot_of_.begin(), slot_of_.end(), -1);
  filled_ = 0;
  sample_shape_.clear();
  memory_ = torch::Tensor();
  // The file's slots are overwritten before they are read again; its length
  // stays, which costs nothing until it is written.
}

void PrefixCache::lay_out(const torch::Tensor& one_output) {
  sample_shape_ = one_output.sizes().vec();
  dtype_ = one_output.scalar_type();
  sample_bytes_ = one_output.numel() * static_cast<int64_t>(one_output.element_size());
  memory_slots_ = std::min(samples_, sample_bytes_ > 0 ? memory_bytes_ / sample_bytes_ : samples_);
  std::vector<int64_t> shape{0};
  shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
  // Grown as slots are taken (a run's shard is a fraction of the split).
  memory_ = torch::empty(shape, torch::TensorOptions().dtype(dtype_));
}

void PrefixCache::write_file_slot(int64_t file_slot, const torch::Tensor& sample) {
  if (file_ < 0) {
    file_ = ::open(spill_folder_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (file_ < 0)
      throw std::runtime_error("elastic.cache: cannot make the cache's file in " +
                               spill_folder_.string() + ": " + errno_text());
  }
  const auto* data = static_cast<const char*>(sample.data_ptr());
  int64_t done = 0;
  while (done < sample_bytes_) {
    const ssize_t n = ::pwrite(file_, data + done, size_t(sample_bytes_ - done),
                               file_slot * sample_bytes_ + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw std::runtime_error("elastic.cache: cannot write the cache's file in " +
                               spill_folder_.string() + ": " + errno_text());
    done += n;
  }
}

void PrefixCache::read_file_slot(int64_t file_slot, torch::Tensor& sample) {
  auto* data = static_cast<char*>(sample.data_ptr());
  int64_t done = 0;
  while (done < sample_bytes_) {
    const ssize_t n =
        ::pread(file_, data + done, size_t(sample_bytes_ - done), file_slot * sample_bytes_ + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw std::runtime_error("elastic.cache: cannot read the cache's file in " +
                               spill_folder_.string() + ": " +
                               (n == 0 ? std::string("it is shorter than written") : errno_text()));
    done += n;
  }
}

std::optional<torch::Tensor> PrefixCache::lookup(const torch::Tensor& indices) {
  if (sample_shape_.empty()) return std::nullopt;
  const auto index = indices.to(torch::kCPU, torch::kInt64).contiguous();
  const auto* idx = index.data_ptr<int64_t>();
  const int64_t count = index.numel();
  std::vector<int64_t> in_memory_rows, in_memory_slots;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t slot = slot_of_.at(size_t(idx[i]));
    if (slot < 0) return std::nullopt;
    if (slot < memory_slots_) {
      in_memory_rows.push_back(i);
      in_memory_slots.push_back(slot);
    }
  }
  std::vector<int64_t> shape{count};
  shape.insert(shape.end(), sample_shape_.begin(), sample_shape_.end());
  auto out = torch::empty(shape, torch::TensorOptions().dtype(dtype_));
  if (!in_memory_rows.empty()) {
    const auto rows = torch::tensor(in_memory_rows, torch::kInt64);
    const auto slots = torch::tensor(in_memory_slots, torch::kInt64);
    out.index_copy_(0, rows, memory_.index_select(0, slots));
  }
  if (in_memory_rows.size() < size_t(count))
    for (int64_t i = 0; i < count; ++i) {
      const int64_t slot = slot_of_[size_t(idx[i])];
      if (slot < memory_slots_) continue;
      auto row = out[i];
      read_file_slot(slot - memory_slots_, row);
    }
  return out;
}

void PrefixCache::store(const torch::Tensor& indices, const torch::Tensor& outputs) {
  const auto index = indices.to(torch::kCPU, torch::kInt64).contiguous();
  const auto* idx = index.data_ptr<int64_t>();
  const auto host = outputs.detach().to(torch::kCPU).contiguous();
  if (sample_shape_.empty()) lay_out(host[0]);
  std::vector<int64_t> rows, slots;  // of the batch, and the memory slots they take
  for (int64_t i = 0; i < index.numel(); ++i) {
    auto& slot = slot_of_.at(size_t(idx[i]));
    if (slot >= 0) continue;
    slot = filled_++;
    if (slot < memory_slots_) {
      rows.push_back(i);
      slots.push_back(slot);
    } else {
      write_file_slot(slot - memory_slots_, host[i]);
    }
  }
  if (rows.empty()) return;
  // Memory slots are taken in order; the rows grow by doubling up to the bound.
  const int64_t needed = slots.back() + 1;
  if (needed > memory_.size(0)) {
    auto shape = memory_.sizes().vec();
    shape[0] = std::min(memory_slots_, std::max(needed, 2 * memory_.size(0)));
    auto grown = torch::empty(shape, memory_.options());
    grown.narrow(0, 0, memory_.size(0)).copy_(memory_);
    memory_ = std::move(grown);
  }
  memory_.index_copy_(0, torch::tensor(slots, torch::kInt64),
                      host.index_select(0, torch::tensor(rows, torch::kInt64)));
}

}  // namespace flotilla
