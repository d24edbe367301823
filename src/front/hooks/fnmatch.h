// Shell-style pattern matching over module paths (libc's fnmatch), with the
// semantics of Python's fnmatch.fnmatch on POSIX (case-sensitive): '*' matches any run of
// characters (dots included, so "outer.*" matches "outer.0" and
// "outer.inner.x"), '?' one character, "[seq]" / "[!seq]" one character in /
// not in the set (ranges "a-z" allowed; a '[' without a closing ']' is literal).
#pragma once

#include <string>

namespace nnsight::hooks {

bool fnmatch(const std::string& name, const std::string& pattern);

}  // namespace nnsight::hooks
