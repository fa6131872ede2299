// libFuzzer target: a sweep file through parse_sweep; a sweep that parses is
// written as stored and read back, and a small one expanded into its points.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/sweep.h"

using namespace flotilla;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // base_file names resolve here, where no file is: a fuzzed sweep reads nothing.
  const std::filesystem::path nowhere = "/nonexistent/flotilla-fuzz";
  SweepSpec spec;
  try {
    spec = parse_sweep(text, "fuzz", nowhere, "fuzz");
  } catch (const ConfigError&) {
    return 0;
  }
  parse_sweep(sweep_to_json(spec), "fuzz stored", nowhere, "fuzz");
  if (!spec.base_json.empty() && sweep_size(spec) <= 16) expand_sweep(spec);
  return 0;
}
