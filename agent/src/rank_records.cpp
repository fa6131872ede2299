#include "rank_records.h"

#include <nlohmann/json.hpp>

#include "flotilla/protocol/metric_records.h"
#include "flotilla/protocol/record_reading.h"

namespace flotilla::agent {

std::optional<RankLine> read_rank_line(std::string_view line, double arrival_time) {
  // nlohmann's lexer takes a NUL for the end of its input, so "{}\0junk"
  // would parse as {} and the junk would be spooled verbatim, making the
  // spool line undecodable for the controller. No JSON text holds a raw NUL.
  if (line.find('\0') != std::string_view::npos) return std::nullopt;
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  const auto type = j.find("type");
  RankLine out;
  const std::string type_name =
      type != j.end() && type->is_string() ? type->get<std::string>() : "";
  out.is_end = type_name == "end";
  if (const auto step = j.find("step");
      type_name == "step" && step != j.end() && step->is_number_integer())
    out.step = step->get<int64_t>();
  // Every record carries the node's clock at its arrival, so that views can
  // place it in wall-clock time; a rank's own "time" is kept, and then the
  // line, checked above, is spooled as it came.
  if (j.contains("time")) {
    out.record_json = std::string(line);
  } else {
    j["time"] = arrival_time;
    out.record_json = j.dump();
  }
  return out;
}

std::optional<RankEnd> read_rank_end(std::string_view record_json) {
  const auto end = records::end_from_line(record_json);
  if (!end) return std::nullopt;
  RankEnd out{std::string(records::name_of(end->outcome)), end->message, kNoWallTime};
  // An engine that does not say when it failed sorts after those that do.
  if (nlohmann::json::parse(record_json, nullptr, false).contains("wall_time"))
    out.wall_time = end->wall_time;
  return out;
}

}  // namespace flotilla::agent
