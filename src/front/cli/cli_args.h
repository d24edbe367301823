// The options of one nnsight subcommand, parsed by CLI11: --name value,
// --name=value, --flag, repeated options, with errors that name the option.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nnsight::cli {

class CliArgs {
 public:
  // Parses argv[first..]: `flags` take no value, the other `options` take
  // exactly one per occurrence. Throws std::invalid_argument naming the first
  // unknown option, stray argument or option without a value -- unless
  // --help is given (then has("help") and nothing else is checked).
  CliArgs(int argc, char** argv, int first, const std::vector<std::string>& flags,
          const std::vector<std::string>& options);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> all(const std::string& name) const;  // every occurrence, in order
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_double(const std::string& name, double fallback) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

// For one output line per prompt: a newline becomes a backslash and an n,
// and a backslash is doubled.
std::string escape_newlines(const std::string& s);

}  // namespace nnsight::cli
