#pragma once
// Splits a byte stream into lines without ever holding more than one line of
// kMaxLineBytes: a longer line is reported as overlong and skipped.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "flotilla/protocol/messages.h"

namespace flotilla::protocol {

class LineBuffer {
 public:
  explicit LineBuffer(size_t max_line = kMaxLineBytes) : max_line_(max_line) {}

  // Calls on_line for each complete line (without '\n'), on_overlong(bytes)
  // for each line that exceeded the limit (once its end arrives).
  void feed(std::string_view bytes, const std::function<void(std::string_view)>& on_line,
            const std::function<void(size_t)>& on_overlong);
  // What is left without a newline (a stream that ended mid-line).
  std::string take_rest();

 private:
  size_t max_line_;
  std::string pending_;
  size_t skipped_ = 0;  // >0: inside an overlong line, this many bytes so far
};

}  // namespace flotilla::protocol
