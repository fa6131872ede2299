#include "flotilla/protocol/record_reading.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "flotilla/protocol/record_fields.h"

namespace flotilla::records {
namespace {

using nlohmann::json;

// A record's fields, read with the struct's value as the default; the first
// field present with the wrong type makes the whole record unreadable.
class Fields {
 public:
  Fields(std::string_view line, std::string_view type) {
    object_ = json::parse(line, nullptr, false);
    // Not value("type", ...): it throws when "type" is not text (found by fuzzing).
    const auto found = object_.is_object() ? object_.find("type") : object_.end();
    ok_ = object_.is_object() && found != object_.end() && found->is_string() &&
          found->get_ref<const std::string&>() == type;
  }
  bool ok() const { return ok_; }
  bool has(const char* name) const { return object_.contains(name); }
  const json& object() const { return object_; }

  // An optional field is empty unless the line has it.
  template <typename T>
  void read(const char* name, std::optional<T>& into) {
    into.reset();
    if (!ok_ || !has(name)) return;
    T value{};
    read(name, value);
    into = value;
  }

  template <typename T>
  void read(const char* name, T& into) {
    const auto it = object_.find(name);
    if (!ok_ || it == object_.end()) return;
    if constexpr (std::is_same_v<T, Outcome>) {
      const auto parsed =
          it->is_string() ? outcome_from_name(it->get_ref<const std::string&>()) : std::nullopt;
      if (!parsed) return fail();
      into = *parsed;
    } else if constexpr (std::is_same_v<T, bool>) {  // before is_integral, which bool also is
      if (!it->is_boolean()) return fail();
      into = it->get<bool>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) return fail();
      into = it->get<std::string>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer() && !it->is_number_unsigned()) return fail();
      into = it->get<T>();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!it->is_number()) return fail();
      into = it->get<T>();
    } else {
      if (!it->is_array()) return fail();
      into.clear();
      for (const auto& v : *it) {
        if (!v.is_number_integer()) return fail();
        into.push_back(v.get<int64_t>());
      }
    }
  }

 private:
  void fail() { ok_ = false; }
  json object_;
  bool ok_ = false;
};

// Every field of the table read, each kept at the struct's default where the
// line lacks it.
template <class Record>
std::optional<Record> record_from_line(std::string_view line, std::string_view type) {
  Fields f(line, type);
  Record r;
  visit_fields(r, [&](const char* name, auto& value, bool) { f.read(name, value); });
  if (!f.ok()) return std::nullopt;
  return r;
}

}  // namespace

std::optional<Start> start_from_line(std::string_view line) {
  return record_from_line<Start>(line, "start");
}

std::optional<Step> step_from_line(std::string_view line) {
  return record_from_line<Step>(line, "step");
}

std::optional<Epoch> epoch_from_line(std::string_view line) {
  return record_from_line<Epoch>(line, "epoch");
}

std::optional<End> end_from_line(std::string_view line) {
  return record_from_line<End>(line, "end");
}

std::optional<std::map<int64_t, int64_t>> rank_rss_from_line(std::string_view line) {
  Fields f(line, "system");
  if (!f.ok()) return std::nullopt;
  std::map<int64_t, int64_t> rss;
  const auto it = f.object().find("rank_rss");
  if (it == f.object().end()) return rss;
  if (!it->is_object()) return std::nullopt;
  for (const auto& [rank, bytes] : it->items()) {
    int64_t r = 0;
    const auto [end, error] = std::from_chars(rank.data(), rank.data() + rank.size(), r);
    if (error != std::errc() || end != rank.data() + rank.size()) return std::nullopt;
    if (!bytes.is_number_integer()) return std::nullopt;
    rss[r] = bytes.get<int64_t>();
  }
  return rss;
}

bool is_lead(const Step& step) {
  if (!step.loss) return false;
  if (step.stage >= 0) return step.replica == 0;
  return step.rank == 0;
}

}  // namespace flotilla::records
