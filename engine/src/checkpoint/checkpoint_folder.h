#pragma once
// A rank's checkpoints on its node's disk: one folder per step, one file per
// rank in it (root/step-000000300/rank-1.pt), so that ranks sharing a node,
// or a shared file system, never write the same file. A file is written under
// a temporary name, flushed to disk and renamed: a file with its final name is
// whole, and one cut short by a crash keeps its temporary name and is never
// read. Free of LibTorch: bytes in, bytes out.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace flotilla::checkpoint {

class CheckpointFolder {
 public:
  CheckpointFolder(std::filesystem::path root, int64_t rank);

  const std::filesystem::path& root() const { return root_; }
  // This rank's file of `step`, whether or not it is there.
  std::filesystem::path file(int64_t step) const;
  // Writes `bytes` as this rank's checkpoint of `step`, atomically and
  // durably; throws std::runtime_error naming the file when it cannot.
  void write(int64_t step, const std::string& bytes) const;
  // The steps whose file of this rank is whole, oldest first.
  std::vector<int64_t> steps() const;
  std::string read(int64_t step) const;
  // Removes this rank's files of all but the newest `keep` steps, with their
  // step folders once no rank's file is left in them, and temporary files
  // this rank left behind.
  void keep_newest(int64_t keep) const;

 private:
  std::filesystem::path root_;
  int64_t rank_;
};

}  // namespace flotilla::checkpoint
