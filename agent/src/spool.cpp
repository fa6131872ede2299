#include "spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "flotilla/protocol/messages.h"
#include "run_directory.h"

namespace flotilla::agent {

namespace {
std::string spool_write_message(const std::filesystem::path& file, int error) {
  if (error == ENOSPC || error == EDQUOT)
    return "no space left on device for the spool " + file.string() +
           (error == EDQUOT ? " (disk quota exceeded)" : "");
  return "cannot write the spool " + file.string() + ": " + std::strerror(error);
}
}  // namespace

SpoolWriteError::SpoolWriteError(const std::filesystem::path& file, int error)
    : std::runtime_error(spool_write_message(file, error)) {}

SpoolWriter::SpoolWriter(const std::filesystem::path& file) : path_(file) {
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
  // Written past stdio's buffer: a line that failed must not linger there and
  // reach the file later, behind lines written after it.
  const int fd = ::fileno(file_);
  struct stat before {};
  const bool sized = ::fstat(fd, &before) == 0;
  const std::string data = line + '\n';
  // The line's room is taken first, so that a full disk refuses it before
  // any of it is in the file, where a reader of the spool could see it.
  // (KEEP_SIZE: the room lies past the end, for the append to fill.)
  if (sized &&
      ::fallocate(fd, FALLOC_FL_KEEP_SIZE, before.st_size, static_cast<off_t>(data.size())) != 0 &&
      (errno == ENOSPC || errno == EDQUOT))
    throw SpoolWriteError(path_, errno);
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int error = n < 0 ? errno : ENOSPC;
    // A spool holds whole lines only: what reached the file of this one is taken back.
    if (sized && ::ftruncate(fd, before.st_size) != 0) {
    }
    throw SpoolWriteError(path_, error);
  }
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

int64_t append_run_end(const std::filesystem::path& file, const std::string& run,
                       const std::string& outcome, const std::string& message) {
  SpoolWriter spool(file);
  spool.append(protocol::encode(protocol::RunEnd{run, spool.next_seq(), outcome, message}));
  return spool.last_seq();
}

}  // namespace flotilla::agent
