#include "front/hooks/fnmatch.h"

#include <cstddef>

namespace nnsight::hooks {

namespace {

// Matches the bracket expression starting at pattern[p] == '[' against c.
// Returns the index just past the closing ']', or npos when the bracket is
// unterminated (then '[' is an ordinary character).
size_t match_class(const std::string& pattern, size_t p, char c, bool& matched) {
  size_t i = p + 1;
  bool negate = false;
  if (i < pattern.size() && pattern[i] == '!') {
    negate = true;
    ++i;
  }
  const size_t first = i;
  // A ']' right after '[' or "[!" belongs to the set.
  while (i < pattern.size() && (pattern[i] != ']' || i == first)) ++i;
  if (i >= pattern.size()) return std::string::npos;
  bool in = false;
  for (size_t j = first; j < i; ++j) {
    if (j + 2 < i && pattern[j + 1] == '-') {
      // Python drops a range whose end is before its start.
      if (pattern[j] <= c && c <= pattern[j + 2]) in = true;
      j += 2;
    } else if (pattern[j] == c) {
      in = true;
    }
  }
  matched = in != negate;
  return i + 1;
}

}  // namespace

bool fnmatch(const std::string& name, const std::string& pattern) {
  size_t n = 0, p = 0;
  // Backtracking point: the last '*' seen and the name position it was tried at.
  size_t star_p = std::string::npos, star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size()) {
      const char pc = pattern[p];
      if (pc == '*') {
        star_p = p++;
        star_n = n;
        continue;
      }
      if (pc == '?') {
        ++p;
        ++n;
        continue;
      }
      if (pc == '[') {
        bool matched = false;
        const size_t next = match_class(pattern, p, name[n], matched);
        if (next == std::string::npos) {
          if (name[n] == '[') {
            ++p;
            ++n;
            continue;
          }
        } else if (matched) {
          p = next;
          ++n;
          continue;
        }
      } else if (pc == name[n]) {
        ++p;
        ++n;
        continue;
      }
    }
    // Mismatch: let the last '*' swallow one more character, or fail.
    if (star_p == std::string::npos) return false;
    p = star_p + 1;
    n = ++star_n;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace nnsight::hooks
