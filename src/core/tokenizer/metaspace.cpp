#include "core/tokenizer/metaspace.h"

namespace nnsight {

void Metaspace::apply(std::string_view text, bool at_input_start, std::string& out) const {
  out.clear();
  for (char c : text) {
    if (c == ' ') {
      out += replacement;
    } else {
      out.push_back(c);
    }
  }
  const bool starts = out.compare(0, replacement.size(), replacement) == 0;
  if (!starts &&
      (prepend_scheme == PrependScheme::kAlways || (prepend_scheme == PrependScheme::kFirst && at_input_start))) {
    out.insert(0, replacement);
  }
}

bool parse_prepend_scheme(std::string_view name, PrependScheme& out) {
  if (name == "always") {
    out = PrependScheme::kAlways;
  } else if (name == "first") {
    out = PrependScheme::kFirst;
  } else if (name == "never") {
    out = PrependScheme::kNever;
  } else {
    return false;
  }
  return true;
}

}  // namespace nnsight
