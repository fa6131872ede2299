#pragma once
// Numbers as text, the same in every locale. Qt programs run in the user's
// locale, and the C library's conversions (strtod, printf, std::to_string of
// a double) follow it: under de_DE "0.05" does not parse and 0.5 prints as
// "0,500000". Configs, protocol, records, CSV and Markdown use these instead.

#include <optional>
#include <string>
#include <string_view>

namespace flotilla {

// The shortest text that reads back as the same double ("0.05", "1e-05", "3").
std::string format_number(double value);
// `value` with exactly `decimals` digits after the point ("0.050").
std::string format_fixed(double value, int decimals);
// The whole of `text` as a finite number (a leading '+' allowed); nullopt
// for anything else, including "0,05", "nan" and "inf".
std::optional<double> parse_number(std::string_view text);

}  // namespace flotilla
