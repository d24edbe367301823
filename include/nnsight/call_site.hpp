// CallSite: the user's file and line, captured where a proxy method is called.
// Methods take `CallSite site = CallSite()` as their last parameter; the
// default arguments below are evaluated at the caller's expression (GCC and
// Clang, C++17), so every recorded node knows the line that created it.
#pragma once

#include <nnsight/source_location.hpp>

namespace nnsight {

namespace detail {
// Keeps CallSite from being built out of braces such as {0} by accident.
struct CallSiteTag {
  explicit CallSiteTag() = default;
};
}  // namespace detail

class CallSite {
 public:
  CallSite(detail::CallSiteTag = detail::CallSiteTag(), const char* file = __builtin_FILE(),
           unsigned line = __builtin_LINE()) noexcept
      : file_(file), line_(line) {}
  static CallSite at(const char* file, unsigned line) noexcept { return CallSite(detail::CallSiteTag(), file, line); }

  const char* file() const { return file_; }
  unsigned line() const { return line_; }
  SourceLoc loc() const { return SourceLoc{file_ ? file_ : "", line_}; }

 private:
  const char* file_;
  unsigned line_;
};

}  // namespace nnsight
