// libFuzzer target: bytes from the wire, split into lines by the agent's and
// controller's LineBuffer, each line through protocol::decode. A message that
// decodes must encode to a line that decodes to the same message type.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "flotilla/protocol/line_buffer.h"
#include "flotilla/protocol/messages.h"

using namespace flotilla::protocol;

namespace {

void decode_line(std::string_view line) {
  Message message;
  try {
    message = decode(line);
  } catch (const DecodeError&) {
    return;  // refused with a reason: what a malformed line must get
  }
  const Message again = decode(encode(message));  // throws (and so fails) if encode wrote junk
  if (type_of(again) != type_of(message)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The whole input as one line, then split as a stream is, with a small line
  // limit so that the overlong path is reached too.
  decode_line(bytes);
  LineBuffer lines(256);
  size_t overlong = 0;
  lines.feed(bytes, decode_line, [&](size_t n) {
    if (n <= 256) std::abort();  // only a line over the limit is overlong
    ++overlong;
  });
  decode_line(lines.take_rest());
  return 0;
}
