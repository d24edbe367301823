// SourceLoc: the user's file and line, captured at the call site through
// default arguments (GCC and Clang evaluate __builtin_FILE()/__builtin_LINE()
// where the call is written, which C++17 allows without <source_location>).
#pragma once

#include <cstdint>
#include <string>

namespace nnsight {

struct SourceLoc {
  std::string file;
  uint32_t line = 0;

  static SourceLoc current(const char* file = __builtin_FILE(), uint32_t line = __builtin_LINE()) {
    return SourceLoc{file, line};
  }
  bool known() const { return line != 0; }
  // "file.cpp:12", or "<unknown location>".
  std::string str() const { return known() ? file + ":" + std::to_string(line) : std::string("<unknown location>"); }
  bool operator==(const SourceLoc& o) const { return file == o.file && line == o.line; }
  bool operator!=(const SourceLoc& o) const { return !(*this == o); }
};

}  // namespace nnsight
