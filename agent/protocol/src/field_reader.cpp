#include "field_reader.h"

#include <algorithm>

namespace flotilla::detail {

std::string describe(const nlohmann::json& value) {
  if (value.is_object()) return "a mapping";
  if (value.is_null()) return "nothing";
  std::string text = value.dump();
  if (value.is_array() && text.size() > 60) return "a list of " + std::to_string(value.size());
  return text;
}

FieldReader::FieldReader(const nlohmann::json& object, std::string prefix,
                         std::vector<std::string>& problems)
    : object_(object), prefix_(std::move(prefix)), problems_(problems) {}

void FieldReader::fail(const char* key, const std::string& what) {
  problems_.push_back(path(key) + ": " + what);
}

const nlohmann::json* FieldReader::take(const char* key) {
  known_.insert(key);
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::read(const char* key, std::string& out) {
  if (const auto* v = take(key)) {
    if (v->is_string())
      out = v->get<std::string>();
    else
      fail(key, "expected text, got " + describe(*v));
  }
}

void FieldReader::read(const char* key, int64_t& out) {
  if (const auto* v = take(key)) {
    if (v->is_number_integer())
      out = v->get<int64_t>();
    else
      fail(key, "expected an integer, got " + describe(*v));
  }
}

void FieldReader::read(const char* key, uint64_t& out) {
  if (const auto* v = take(key)) {
    if (v->is_number_integer() && (v->is_number_unsigned() || v->get<int64_t>() >= 0))
      out = v->get<uint64_t>();
    else
      fail(key, "expected a non-negative integer, got " + describe(*v));
  }
}

void FieldReader::read(const char* key, double& out) {
  if (const auto* v = take(key)) {
    if (v->is_number())
      out = v->get<double>();
    else
      fail(key, "expected a number, got " + describe(*v));
  }
}

void FieldReader::read(const char* key, bool& out) {
  if (const auto* v = take(key)) {
    if (v->is_boolean())
      out = v->get<bool>();
    else
      fail(key, "expected true or false, got " + describe(*v));
  }
}

void FieldReader::read(const char* key, std::vector<int64_t>& out) {
  if (const auto* v = take(key)) {
    bool ok = v->is_array() && std::all_of(v->begin(), v->end(),
                                           [](const auto& x) { return x.is_number_integer(); });
    if (ok)
      out = v->get<std::vector<int64_t>>();
    else
      fail(key, "expected a list of integers, got " + describe(*v));
  }
}

void FieldReader::read(const char* key, std::vector<std::string>& out) {
  if (const auto* v = take(key)) {
    if (v->is_string()) {
      out = {v->get<std::string>()};
      return;
    }
    bool ok = v->is_array() &&
              std::all_of(v->begin(), v->end(), [](const auto& x) { return x.is_string(); });
    if (ok)
      out = v->get<std::vector<std::string>>();
    else
      fail(key, "expected a list of names, got " + describe(*v));
  }
}

std::optional<FieldReader> FieldReader::child(const char* key) {
  const auto* v = take(key);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    fail(key, "expected a mapping of keys, got " + describe(*v));
    return std::nullopt;
  }
  return FieldReader(*v, path(key) + ".", problems_);
}

const nlohmann::json* FieldReader::array(const char* key) {
  const auto* v = take(key);
  if (v && !v->is_array()) {
    fail(key, "expected a list, got " + describe(*v));
    return nullptr;
  }
  return v;
}

void FieldReader::finish() {
  std::string allowed;
  for (const auto& k : known_) allowed += (allowed.empty() ? "" : ", ") + k;
  for (const auto& [key, value] : object_.items())
    if (!known_.count(key))
      problems_.push_back(prefix_ + key + ": unknown key; allowed: " + allowed);
}

}  // namespace flotilla::detail
