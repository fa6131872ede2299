#pragma once
// The spool: every record of a run, one protocol line each with its `seq`,
// appended before it is streamed. Streams and resumes are reads of it.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "flotilla/protocol/line_buffer.h"

namespace flotilla::agent {

// The spool's file system refused a line (full, failing): the line is not in
// the spool, not even in part, and the message names the spool.
class SpoolWriteError : public std::runtime_error {
 public:
  SpoolWriteError(const std::filesystem::path& file, int error);
};

class SpoolWriter {
 public:
  explicit SpoolWriter(const std::filesystem::path& file);
  ~SpoolWriter();
  SpoolWriter(const SpoolWriter&) = delete;
  SpoolWriter& operator=(const SpoolWriter&) = delete;

  int64_t next_seq() const { return last_seq_ + 1; }
  int64_t last_seq() const { return last_seq_; }
  // Appends one encoded message whose seq is next_seq(), written through to
  // the file; throws SpoolWriteError when the file system refuses it.
  void append(const std::string& line);

 private:
  std::filesystem::path path_;
  std::FILE* file_;
  int64_t last_seq_ = 0;
};

// Reads a spool as it grows, from the start.
class SpoolReader {
 public:
  explicit SpoolReader(std::filesystem::path file) : file_(std::move(file)) {}
  // Calls on_line for each complete line appended since the last call.
  void poll(const std::function<void(std::string_view)>& on_line);

 private:
  std::filesystem::path file_;
  std::ifstream in_;  // opened once the file exists, then read on from where it stopped
  protocol::LineBuffer lines_;
};

// Ends a run whose supervisor cannot (it died, or failed before it could):
// its run_end appended to the spool `file`, numbered on; returns its seq.
int64_t append_run_end(const std::filesystem::path& file, const std::string& run,
                       const std::string& outcome, const std::string& message);

// The seq of a spool line, without decoding the whole record.
std::optional<int64_t> seq_of(std::string_view line);

}  // namespace flotilla::agent
