#include "core/tokenizer/onig_compat.h"

namespace nnsight {
namespace {

// Unicode White_Space, as class contents.
constexpr std::string_view kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
constexpr std::string_view kHexDigit = "0-9A-Fa-f";

}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  size_t i = 0;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 'Q') {  // \Q...\E: quoted text, copied untouched
        const size_t end = p.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? p.size() : end + 2;
        out.append(p.substr(i, stop - i));
        i = stop;
        continue;
      }
      if (e == 's' || e == 'h') {
        const std::string_view set = e == 's' ? kWhiteSpace : kHexDigit;
        if (in_class) {
          out.append(set);
        } else {
          out += '[';
          out.append(set);
          out += ']';
        }
        i += 2;
        continue;
      }
      if ((e == 'S' || e == 'H') && !in_class) {
        out += "[^";
        out.append(e == 'S' ? kWhiteSpace : kHexDigit);
        out += ']';
        i += 2;
        continue;
      }
      out.append(p.substr(i, 2));  // any other escape, e.g. \p{L} or \[
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      ++i;
      // A ']' right after '[' or '[^' is a literal member.
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // [:alpha:]
      const size_t end = p.find(":]", i + 2);
      const size_t stop = end == std::string_view::npos ? p.size() : end + 2;
      out.append(p.substr(i, stop - i));
      i = stop;
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
    ++i;
  }
  return out;
}

}  // namespace nnsight
