#include "checkpoint_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace flotilla::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kStepPrefix = "step-";

std::string step_folder_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(step));
  return name;
}

std::runtime_error failure(const fs::path& path, const std::string& what) {
  return std::runtime_error("checkpoint " + path.string() + ": " + what + ": " +
                            std::strerror(errno));
}

// fsync of a file or folder: a rename is durable only once its folder is.
void sync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw failure(path, "cannot open to flush it");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw failure(path, "cannot flush it to disk");
}

}  // namespace

CheckpointFolder::CheckpointFolder(fs::path root, int64_t rank)
    : root_(std::move(root)), rank_(rank) {}

fs::path CheckpointFolder::file(int64_t step) const {
  return root_ / step_folder_name(step) / ("rank-" + std::to_string(rank_) + ".pt");
}

void CheckpointFolder::write(int64_t step, const std::string& bytes) const {
  const fs::path target = file(step);
  const fs::path folder = target.parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw std::runtime_error("checkpoint " + folder.string() + ": " + ec.message());
  const fs::path temporary = target.string() + ".partial";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw failure(temporary, "cannot create");
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const auto error = failure(temporary, "cannot write");
      ::close(fd);
      ::unlink(temporary.c_str());
      throw error;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const auto error = failure(temporary, "cannot flush it to disk");
    ::unlink(temporary.c_str());
    throw error;
  }
  if (::rename(temporary.c_str(), target.c_str()) != 0) throw failure(target, "cannot rename");
  sync_path(folder, O_RDONLY | O_DIRECTORY);
}

std::vector<int64_t> CheckpointFolder::steps() const {
  std::vector<int64_t> found;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kStepPrefix, 0) != 0) continue;
    int64_t step = 0;
    const char* first = name.data() + kStepPrefix.size();
    const char* last = name.data() + name.size();
    const auto [p, parse_error] = std::from_chars(first, last, step);
    if (parse_error != std::errc() || p != last || step <= 0) continue;
    if (fs::is_regular_file(file(step), ec)) found.push_back(step);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string CheckpointFolder::read(int64_t step) const {
  const fs::path path = file(step);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw failure(path, "cannot open");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw failure(path, "cannot read");
  return bytes.str();
}

void CheckpointFolder::keep_newest(int64_t keep) const {
  const auto all = steps();
  std::error_code ignored;  // what cannot be removed now is tried again at the next save
  for (size_t i = 0; i + static_cast<size_t>(std::max<int64_t>(keep, 0)) < all.size(); ++i) {
    fs::remove(file(all[i]), ignored);
    fs::remove(file(all[i]).parent_path(), ignored);  // only once empty: other ranks' stay
  }
  // A crash mid-write leaves a temporary file of this rank: never read, removed here.
  const std::string partial = "rank-" + std::to_string(rank_) + ".pt.partial";
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec))
    fs::remove(it->path() / partial, ignored);
}

}  // namespace flotilla::checkpoint
