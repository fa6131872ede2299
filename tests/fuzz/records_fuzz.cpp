// libFuzzer target: a stored metric record line through the readers that
// compare and reports use. Each either reads or says nullopt; none throws.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flotilla/protocol/record_reading.h"

using namespace flotilla;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  records::start_from_line(line);
  if (const auto step = records::step_from_line(line)) records::is_lead(*step);
  records::epoch_from_line(line);
  records::end_from_line(line);
  records::rank_rss_from_line(line);
  return 0;
}
