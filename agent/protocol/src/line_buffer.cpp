#include "flotilla/protocol/line_buffer.h"

#include <utility>

namespace flotilla::protocol {

void LineBuffer::feed(std::string_view bytes, const std::function<void(std::string_view)>& on_line,
                      const std::function<void(size_t)>& on_overlong) {
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const std::string_view part = bytes.substr(0, nl);
    if (skipped_ > 0) {
      skipped_ += part.size();
    } else if (pending_.size() + part.size() > max_line_) {
      skipped_ = pending_.size() + part.size();
      pending_.clear();
      pending_.shrink_to_fit();
    } else {
      pending_.append(part);
    }
    if (nl == std::string_view::npos) return;
    if (skipped_ > 0) {
      on_overlong(skipped_);
      skipped_ = 0;
    } else {
      on_line(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

std::string LineBuffer::take_rest() {
  skipped_ = 0;
  return std::exchange(pending_, std::string());
}

}  // namespace flotilla::protocol
