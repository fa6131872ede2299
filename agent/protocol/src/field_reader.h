#pragma once
// Reads typed fields out of one JSON object, collecting a "key: problem" line
// for every wrong type or value and for every key it was never asked about.

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "enum_names.h"

namespace flotilla::detail {

std::string describe(const nlohmann::json& value);  // "abc" quoted, 1.5, [1, 2], a mapping

class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string prefix, std::vector<std::string>& problems);

  void read(const char* key, std::string& out);
  void read(const char* key, int64_t& out);
  void read(const char* key, uint64_t& out);
  void read(const char* key, double& out);
  void read(const char* key, bool& out);
  void read(const char* key, std::vector<int64_t>& out);
  void read(const char* key, std::vector<std::string>& out);

  template <typename E>
  void read_enum(const char* key, E& out) {
    const nlohmann::json* v = take(key);
    if (!v) return;
    if (v->is_string()) {
      if (auto e = enum_from_name<E>(v->get<std::string>())) {
        out = *e;
        return;
      }
      fail(key, "unknown value " + describe(*v) + "; allowed: " + enum_allowed<E>());
    } else {
      fail(key, "expected one of " + enum_allowed<E>() + ", got " + describe(*v));
    }
  }

  // A reader of a nested mapping; empty (and a problem) when present but not a mapping.
  std::optional<FieldReader> child(const char* key);
  const nlohmann::json* array(const char* key);
  // A reader of a mapping found another way (a list element) that reports into the same list.
  FieldReader nested(const nlohmann::json& object, const std::string& key) {
    return FieldReader(object, path(key.c_str()) + ".", problems_);
  }
  std::string path(const char* key) const { return prefix_ + key; }
  void fail(const char* key, const std::string& what);

  // Reports every key that no read() asked for.
  void finish();

 private:
  const nlohmann::json* take(const char* key);

  const nlohmann::json& object_;
  std::string prefix_;
  std::vector<std::string>& problems_;
  std::set<std::string> known_;
};

}  // namespace flotilla::detail
