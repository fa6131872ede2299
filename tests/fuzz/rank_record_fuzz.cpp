// libFuzzer target: a rank's stdout line as the agent's supervisor reads it.
// A line it accepts is spooled inside a protocol record, so the spool line
// must decode on the controller; an end record must read without throwing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "flotilla/protocol/messages.h"
#include "rank_records.h"

using namespace flotilla;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  const auto record = agent::read_rank_line(line, 1.7e9);
  if (!record) return 0;
  if (record->is_end) agent::read_rank_end(record->record_json);
  const protocol::Record spooled{"run-fuzz", 1, "node", 0, record->record_json, {}};
  // The controller's side of the spool: a throw here is a spooled record lost.
  const auto decoded = protocol::decode(protocol::encode(spooled));
  if (!std::holds_alternative<protocol::Record>(decoded)) std::abort();
  return 0;
}
