// Typed options on a CLI11 subcommand. Numbers are checked as text, before
// CLI11 converts them: CLI11 2.1 saturates an out-of-range integer silently
// (--max-tokens 99999999999999999999 would run as 2^63 - 1), and a range
// belongs in the message ("--port: expected an integer in [0, 65535], got
// '70000'").
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

namespace nnsight::cli {

CLI::Option* add_integer(CLI::App& cmd, const std::string& flag, int64_t& value, const std::string& help,
                         int64_t lo = std::numeric_limits<int64_t>::min(),
                         int64_t hi = std::numeric_limits<int64_t>::max());

// A finite number in [lo, hi].
CLI::Option* add_number(CLI::App& cmd, const std::string& flag, double& value, const std::string& help,
                        double lo = -std::numeric_limits<double>::max(),
                        double hi = std::numeric_limits<double>::max());

// For one output line per prompt: a newline becomes a backslash and an n,
// and a backslash is doubled.
std::string escape_newlines(const std::string& s);

}  // namespace nnsight::cli
