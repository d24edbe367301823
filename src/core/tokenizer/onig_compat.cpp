#include "core/tokenizer/onig_compat.h"

#include <pcre2.h>

namespace nnsight {
namespace {

// Unicode White_Space, as class contents.
constexpr std::string_view kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
constexpr std::string_view kHexDigit = "0-9A-Fa-f";

// Unicode General_Category names (and PCRE2's "Any", "L&"): PCRE2 and
// Oniguruma read these alike.
bool is_general_category(std::string_view name) {
  static constexpr std::string_view kNames[] = {"Any", "L&", "L",  "Lu", "Ll", "Lt", "Lm", "Lo", "M",  "Mn",
                                                "Mc",  "Me", "N",  "Nd", "Nl", "No", "P",  "Pc", "Pd", "Ps",
                                                "Pe",  "Pi", "Pf", "Po", "S",  "Sm", "Sc", "Sk", "So", "Z",
                                                "Zs",  "Zl", "Zp", "C",  "Cc", "Cf", "Cs", "Co", "Cn"};
  for (std::string_view n : kNames) {
    if (name == n) return true;
  }
  return false;
}

// True when PCRE2 knows `\p{sc:name}`, i.e. `name` is a script.
bool is_pcre2_script(std::string_view name) {
  const std::string pattern = "\\p{sc:" + std::string(name) + "}";
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                   &err, &offset, nullptr);
  pcre2_code_free(code);
  return code != nullptr;
}

}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  int nested = 0;  // depth of nested sets inside the class
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
      if ((e == 'p' || e == 'P') && i + 2 < p.size() && p[i + 2] == '{') {
        // \p{Han}: Oniguruma matches the Script property, PCRE2 (10.40 on)
        // the wider Script_Extensions (U+3002 "。" is Common but extends to
        // Han), unless asked for "sc:".
        const size_t close = p.find('}', i + 3);
        if (close != std::string_view::npos) {
          std::string_view name = p.substr(i + 3, close - i - 3);
          const bool negated = !name.empty() && name[0] == '^';
          if (negated) name.remove_prefix(1);
          if (!name.empty() && name.find_first_of(":=") == std::string_view::npos && !is_general_category(name) &&
              is_pcre2_script(name)) {
            out += '\\';
            out += e;
            out += negated ? "{^sc:" : "{sc:";
            out.append(name);
            out += '}';
            i = close + 1;
            continue;
          }
        }
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
    if (in_class && c == '[' && !(i + 1 < p.size() && p[i + 1] == '^')) {
      // A nested set, "[a[bc]]": Oniguruma takes the union; PCRE2 would read
      // the '[' as a literal and end the class at the first ']'. Its members
      // are copied into the enclosing class (BLOOM's "[^(\s|[.,!?])]").
      ++nested;
      ++i;
      if (i < p.size() && p[i] == ']') {  // "[]...]": a literal ']', escaped in the flat class
        out += "\\]";
        ++i;
      }
      continue;
    }
    if (in_class && c == ']') {
      if (nested > 0) {
        --nested;
        ++i;
        continue;
      }
      in_class = false;
    }
    out += c;
    ++i;
  }
  return out;
}

}  // namespace nnsight
