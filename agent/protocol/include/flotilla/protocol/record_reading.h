#pragma once
// Metric records read back from their JSON lines (metric_records.h writes
// them), for whoever derives numbers from stored records: the compare table,
// reports. A field a record lacks keeps the struct's default (records of an
// older engine lack newer fields); a field of the wrong type, a line that is
// not a JSON object, or a record of another type gives nullopt, so that the
// caller can count it as malformed rather than read a wrong number.

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

#include "flotilla/protocol/metric_records.h"

namespace flotilla::records {

std::optional<Start> start_from_line(std::string_view line);
std::optional<Step> step_from_line(std::string_view line);
std::optional<Epoch> epoch_from_line(std::string_view line);
std::optional<End> end_from_line(std::string_view line);

// The agent's system record (type "system", one per node and second): the
// resident memory of each rank it runs, rank -> bytes. nullopt when malformed.
std::optional<std::map<int64_t, int64_t>> rank_rss_from_line(std::string_view line);

// The rank that speaks for the run: rank 0, or in a pipeline the last stage
// of replica 0 (the one rank there that computes the loss).
bool is_lead(const Step& step);

}  // namespace flotilla::records
