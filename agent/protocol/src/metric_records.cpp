#include "flotilla/protocol/metric_records.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

#include "flotilla/protocol/record_fields.h"

namespace flotilla::records {
namespace {
using nlohmann::json;

constexpr std::pair<Outcome, std::string_view> kOutcomes[] = {{Outcome::finished, "finished"},
                                                              {Outcome::failed, "failed"},
                                                              {Outcome::oom, "oom"},
                                                              {Outcome::killed, "killed"}};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// A record's line: its type and every field the table says is written.
template <class Record>
std::string line_of(std::string_view type, const Record& r) {
  json j{{"type", type}};
  visit_fields(r, [&](const char* name, const auto& value, bool written) {
    if (!written) return;
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, Outcome>)
      j[name] = name_of(value);
    else if constexpr (is_optional<T>::value)
      j[name] = *value;  // written only when it holds one
    else
      j[name] = value;
  });
  return j.dump();
}

template <class Record>
std::vector<std::string_view> names_of() {
  std::vector<std::string_view> names;
  const Record r;
  visit_fields(r, [&](const char* name, const auto&, bool) { names.push_back(name); });
  return names;
}

}  // namespace

std::string_view name_of(Outcome outcome) {
  for (const auto& [o, name] : kOutcomes)
    if (o == outcome) return name;
  return "?";
}

std::optional<Outcome> outcome_from_name(std::string_view name) {
  for (const auto& [o, n] : kOutcomes)
    if (n == name) return o;
  return std::nullopt;
}

std::string to_line(const Start& r) {
  return line_of("start", r);
}

std::string to_line(const Step& r) {
  return line_of("step", r);
}

std::string to_line(const Epoch& r) {
  return line_of("epoch", r);
}

std::string to_line(const End& r) {
  return line_of("end", r);
}

std::string to_line(const Bench& r) {
  return line_of("bench", r);
}

std::string to_line(const Transition& r) {
  return line_of("transition", r);
}

std::vector<std::string_view> field_names(std::string_view type) {
  if (type == "start") return names_of<Start>();
  if (type == "step") return names_of<Step>();
  if (type == "epoch") return names_of<Epoch>();
  if (type == "end") return names_of<End>();
  if (type == "bench") return names_of<Bench>();
  if (type == "transition") return names_of<Transition>();
  return {};
}

}  // namespace flotilla::records
