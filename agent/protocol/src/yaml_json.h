#pragma once
// YAML and JSON meet in nlohmann::json: YAML is parsed with yaml-cpp and its
// plain scalars typed as YAML 1.2's core schema does (quoted ones stay text).

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace flotilla::detail {

// Throws std::runtime_error "<source>: line L, column C: <reason>" on bad syntax.
nlohmann::json parse_yaml_or_json(std::string_view text, std::string_view source);
// The same, keeping every mapping's keys in the order the text gives them
// (a sweep's axes are a product in file order).
nlohmann::ordered_json parse_yaml_or_json_ordered(std::string_view text, std::string_view source);
std::string json_to_yaml(const nlohmann::json& value);
// Keeps the keys in the order they were inserted.
std::string json_to_yaml(const nlohmann::ordered_json& value);

}  // namespace flotilla::detail
