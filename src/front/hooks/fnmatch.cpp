#include "front/hooks/fnmatch.h"

#include <fnmatch.h>

namespace nnsight::hooks {

bool fnmatch(const std::string& name, const std::string& pattern) {
  // libc reads '\\' as an escape and "[^" as a negated set; Python reads both
  // literally ('!' negates). Escape them so that libc sees Python's pattern.
  std::string p;
  p.reserve(pattern.size() + 4);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' || (pattern[i] == '^' && i > 0 && pattern[i - 1] == '[')) p += '\\';
    p += pattern[i];
  }
  return ::fnmatch(p.c_str(), name.c_str(), 0) == 0;
}

}  // namespace nnsight::hooks
