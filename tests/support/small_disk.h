#pragma once
// A small file system of a test's own (a tmpfs; mounting needs root), which
// the test fills up and frees again. Unmounted at scope end, passed or failed.
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace flotilla::testing {

class SmallDisk {
 public:
  // Whether this process may mount one: a test without it skips, saying so.
  static bool can_mount() { return ::geteuid() == 0; }

  SmallDisk(const std::filesystem::path& where, const std::string& size) : where_(where) {
    std::filesystem::create_directories(where);
    const std::string options = "size=" + size;
    if (::mount("tmpfs", where.c_str(), "tmpfs", 0, options.c_str()) != 0)
      throw std::runtime_error("cannot mount a tmpfs at " + where.string() + ": " +
                               std::strerror(errno));
  }
  ~SmallDisk() { ::umount2(where_.c_str(), MNT_DETACH); }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  // Takes every free byte, in a file of its own.
  void fill() {
    std::ofstream filler(where_ / "filler", std::ios::binary | std::ios::app);
    const std::string block(4096, 'x');
    while (filler.write(block.data(), block.size()) && filler.flush()) {
    }
  }
  void free() { std::filesystem::remove(where_ / "filler"); }

 private:
  std::filesystem::path where_;
};

}  // namespace flotilla::testing
