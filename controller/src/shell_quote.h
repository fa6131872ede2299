#pragma once
// Remote commands are built from argv, each word quoted, never by pasting
// names and paths into a command string.

#include <string>
#include <string_view>
#include <vector>

namespace flotilla::controller {

// The POSIX shell's single-quoted form of `word`: safe for any byte.
std::string shell_quote(std::string_view word);
// `argv` as one command line for `sh -c`, every word quoted.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace flotilla::controller
