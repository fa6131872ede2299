#pragma once
// A rank's stdout as its supervisor reads it: one metric record a line
// (metric_records.h). The rank is a program run from a user's config, so its
// bytes are checked before they reach the spool, whose lines the controller
// must be able to decode: a line is spooled only when it is exactly one JSON
// object, and a rank's end is believed only when it is a well-formed end.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace flotilla::agent {

struct RankLine {
  std::string record_json;  // what the spool gets: the object, with "time" added when it had none
  bool is_end = false;      // a record of type "end"
  std::optional<int64_t> step;  // a step record's "step", when it is an integer
};

// nullopt when the line is not exactly one JSON object (not JSON, another
// value, or bytes after the object, a NUL included): the caller counts it as
// malformed. `arrival_time` (the node's clock) becomes the record's "time"
// when the rank gave none.
std::optional<RankLine> read_rank_line(std::string_view line, double arrival_time);

inline constexpr double kNoWallTime = std::numeric_limits<double>::infinity();

struct RankEnd {
  std::string outcome;  // finished, failed, oom or killed
  std::string message;
  double wall_time =
      kNoWallTime;  // when the rank decided its outcome; kNoWallTime when it did not say
};

// What a rank's end record says; nullopt when it is malformed (an outcome that
// is not one of the four names, a field of the wrong type).
std::optional<RankEnd> read_rank_end(std::string_view record_json);

}  // namespace flotilla::agent
