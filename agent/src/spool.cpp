#include "spool.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <stdexcept>

#include "run_directory.h"

namespace flotilla::agent {

SpoolWriter::SpoolWriter(const std::filesystem::path& file) {
  // A supervisor that restarts continues the numbering where the file ends.
  SpoolReader existing(file);
  existing.poll([&](std::string_view line) {
    if (auto seq = seq_of(line)) last_seq_ = std::max(last_seq_, *seq);
  });
  // 0600 whatever the umask: the spool holds every record of the run.
  const int fd = open_private_for_append(file);
  file_ = ::fdopen(fd, "a");
  if (!file_) {
    ::close(fd);
    throw std::runtime_error(file.string() + ": cannot open the spool");
  }
}

SpoolWriter::~SpoolWriter() {
  std::fclose(file_);
}

void SpoolWriter::append(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);
  ++last_seq_;
}

void SpoolReader::poll(const std::function<void(std::string_view)>& on_line) {
  if (!in_.is_open()) {
    in_.open(file_, std::ios::binary);
    if (!in_.is_open()) return;  // not written yet
  }
  in_.clear();  // past the last poll's end of file; what was appended since follows
  char buffer[1 << 16];
  while (in_.read(buffer, sizeof buffer) || in_.gcount() > 0)
    lines_.feed({buffer, static_cast<size_t>(in_.gcount())}, on_line, [](size_t) {});
}

std::optional<int64_t> seq_of(std::string_view line) {
  // Keys are written sorted, so the top-level "seq" is the last one in the line.
  const auto key = line.rfind("\"seq\":");
  if (key == std::string_view::npos) return std::nullopt;
  int64_t seq = 0;
  const char* begin = line.data() + key + 6;
  auto [p, ec] = std::from_chars(begin, line.data() + line.size(), seq);
  if (ec != std::errc()) return std::nullopt;
  return seq;
}

}  // namespace flotilla::agent
