#include "yaml_json.h"

#include <yaml-cpp/yaml.h>

#include "flotilla/protocol/numbers.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace flotilla::detail {
namespace {

template <typename Json>
Json plain_scalar_as(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  int64_t i = 0;
  const char* end = s.data() + s.size();
  if (auto [p, ec] = std::from_chars(s.data(), end, i); ec == std::errc() && p == end) return i;
  // Never strtod: it reads the process locale's decimal separator.
  if (s.find_first_of("0123456789") != std::string::npos)
    if (const auto d = parse_number(s)) return *d;
  return s;
}

nlohmann::json plain_scalar(const std::string& s) {
  return plain_scalar_as<nlohmann::json>(s);
}

template <typename Json>
Json to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return node.Tag() == "!" ? Json(node.Scalar()) : plain_scalar_as<Json>(node.Scalar());
    case YAML::NodeType::Sequence: {
      auto out = Json::array();
      for (const auto& item : node) out.push_back(to_json<Json>(item));
      return out;
    }
    case YAML::NodeType::Map: {
      auto out = Json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = to_json<Json>(kv.second);
      return out;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

// yaml-cpp writes a value holding a control character plain, and "run:\r"
// followed by another key then reads back as a map (found by fuzzing the
// config parser); double quotes escape them. Keys it quotes itself.
bool has_control_character(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

template <typename Json>
void emit(YAML::Emitter& out, const Json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, item] : v.items()) {
      out << YAML::Key << key << YAML::Value;
      emit(out, item);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    bool scalars = std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_primitive(); });
    out << (scalars ? YAML::Flow : YAML::Block) << YAML::BeginSeq;
    for (const auto& item : v) emit(out, item);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    const auto& s = v.template get_ref<const std::string&>();
    // Quote text that would read back as another type.
    if (has_control_character(s) || !plain_scalar(s).is_string()) out << YAML::DoubleQuoted;
    out << s;
  } else if (v.is_boolean()) {
    out << (v.template get<bool>() ? "true" : "false");
  } else if (v.is_null()) {
    out << YAML::Null;
  } else {
    out << v.dump();
  }
}

// nlohmann reads every integer from 0 up as unsigned; the YAML reading above
// gives a signed integer, or a double past int64's range. The same text read
// either way is the same value, of the same type.
template <typename Json>
void integers_as_yaml_reads_them(Json& v) {
  if (v.is_structured()) {
    for (auto& item : v) integers_as_yaml_reads_them(item);
  } else if (v.is_number_unsigned()) {
    const auto u = v.template get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      v = static_cast<int64_t>(u);
    else
      v = static_cast<double>(u);
  }
}

// The offset of the first byte of `text` that is not part of well-formed
// UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF) or is
// a NUL, or npos. yaml-cpp passes any bytes through, and nlohmann then throws
// from dump() on the first message or export that quotes them (found by
// fuzzing the config and sweep parsers). A NUL is refused too: yaml-cpp
// takes NULs among the first bytes for UTF-16 or UTF-32 ("b\0\0\0" reads as
// UTF-32LE) and decodes the rest into bytes that are not UTF-8 (found again
// by fuzzing once the first fix was in).
size_t first_byte_not_text(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
    if (lead == 0) {
      return i;
    } else if (lead < 0x80) {
      ++i;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    if (i + length > text.size() || byte(i + 1) < low || byte(i + 1) > high) return i;
    for (size_t k = 2; k < length; ++k)
      if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return i;
    i += length;
  }
  return std::string_view::npos;
}

// yaml-cpp writes some escapes of double-quoted scalars as single bytes
// that are not UTF-8 (`\_`, YAML's no-break space, becomes the byte 0xA0),
// from text that is itself valid UTF-8; nlohmann then throws from dump() (found by
// fuzzing the sweep parser). Such a key or value is refused, named.
template <typename Json>
void refuse_bytes_not_text(const Json& value, std::string_view source) {
  const auto check = [&](const std::string& text) {
    if (first_byte_not_text(text) != std::string_view::npos)
      throw std::runtime_error(std::string(source) +
                               ": a quoted scalar's escape (YAML's \\_ for one) gives bytes "
                               "that are not UTF-8 text; write the character itself");
  };
  if (value.is_string()) check(value.template get_ref<const std::string&>());
  if (value.is_object())
    for (const auto& [key, item] : value.items()) {
      check(key);
      refuse_bytes_not_text(item, source);
    }
  if (value.is_array())
    for (const auto& item : value) refuse_bytes_not_text(item, source);
}

template <typename Json>
Json parse_as(std::string_view text, std::string_view source) {
  if (const size_t bad = first_byte_not_text(text); bad != std::string_view::npos) {
    const auto before = text.substr(0, bad);
    const size_t line_start =
        before.rfind('\n') == std::string_view::npos ? 0 : before.rfind('\n') + 1;
    char hex[2];
    const auto hex_end =
        std::to_chars(hex, hex + 2, static_cast<unsigned>(static_cast<unsigned char>(text[bad])),
                      16)
            .ptr;
    const std::string what = text[bad] == '\0'
                                 ? "a NUL byte, which YAML and JSON text cannot hold"
                                 : "not UTF-8 text (byte 0x" + std::string(hex, hex_end) + ")";
    throw std::runtime_error(std::string(source) + ": line " +
                             std::to_string(std::count(before.begin(), before.end(), '\n') + 1) +
                             ", column " + std::to_string(bad - line_start + 1) + ": " + what);
  }
  // JSON text is read as JSON. YAML 1.2 reads it the same, but yaml-cpp
  // refuses an implicit key longer than 1,024 characters, and JSON that
  // Flotilla wrote itself holds longer ones once its escapes are counted (a
  // key of 200 control characters, found by fuzzing: a sweep stored that
  // could not be read back).
  if (auto json = Json::parse(text, nullptr, /*allow_exceptions=*/false); !json.is_discarded()) {
    integers_as_yaml_reads_them(json);
    return json;
  }
  try {
    auto json = to_json<Json>(YAML::Load(std::string(text)));
    refuse_bytes_not_text(json, source);
    return json;
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(std::string(source) + ": line " + std::to_string(e.mark.line + 1) +
                             ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

}  // namespace

nlohmann::json parse_yaml_or_json(std::string_view text, std::string_view source) {
  return parse_as<nlohmann::json>(text, source);
}

nlohmann::ordered_json parse_yaml_or_json_ordered(std::string_view text, std::string_view source) {
  return parse_as<nlohmann::ordered_json>(text, source);
}

std::string json_to_yaml(const nlohmann::json& value) {
  YAML::Emitter out;
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

std::string json_to_yaml(const nlohmann::ordered_json& value) {
  YAML::Emitter out;
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace flotilla::detail
