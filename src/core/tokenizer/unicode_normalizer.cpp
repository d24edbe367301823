#include "core/tokenizer/unicode_normalizer.h"

#include <c10/util/Exception.h>
#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/tokenizer/utf8.h"

namespace nnsight {
namespace {

utf8proc_option_t options_of(UnicodeNormalization form) {
  const int stable = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeNormalization::kNfc:
      return static_cast<utf8proc_option_t>(stable | UTF8PROC_COMPOSE);
    case UnicodeNormalization::kNfd:
      return static_cast<utf8proc_option_t>(stable | UTF8PROC_DECOMPOSE);
    case UnicodeNormalization::kNfkc:
      return static_cast<utf8proc_option_t>(stable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case UnicodeNormalization::kNfkd:
      return static_cast<utf8proc_option_t>(stable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
    case UnicodeNormalization::kNone:
      break;
  }
  TORCH_CHECK(false, "unicode_normalize: no options for form ", static_cast<int>(form));
}

// Every code point below U+0300 is unchanged by NFC and never combines with
// a preceding character; its UTF-8 lead byte is below 0xCC. (NFD and NFKD
// decompose "é", NFKC changes U+00BD: they get no shortcut.)
bool below_combining_marks(std::string_view text) {
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) return false;
  }
  return true;
}

void append_normalized(std::string_view run, utf8proc_option_t options, std::string& out) {
  if (run.empty()) return;
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                          static_cast<utf8proc_ssize_t>(run.size()), &result, options);
  std::unique_ptr<utf8proc_uint8_t, void (*)(void*)> owned(result, std::free);
  TORCH_CHECK(n >= 0, "utf8proc_map failed on well-formed UTF-8: ", utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

}  // namespace

const char* unicode_normalization_name(UnicodeNormalization form) {
  switch (form) {
    case UnicodeNormalization::kNone:
      return "none";
    case UnicodeNormalization::kNfc:
      return "NFC";
    case UnicodeNormalization::kNfd:
      return "NFD";
    case UnicodeNormalization::kNfkc:
      return "NFKC";
    case UnicodeNormalization::kNfkd:
      return "NFKD";
  }
  return "?";
}

bool unicode_normalize(std::string_view text, UnicodeNormalization form, std::string& out) {
  if (form == UnicodeNormalization::kNone) return false;
  if (form == UnicodeNormalization::kNfc && below_combining_marks(text)) {
    return false;
  }
  const utf8proc_option_t options = options_of(form);
  out.clear();
  out.reserve(text.size() + text.size() / 8);
  // Normalize each maximal well-formed run; copy ill-formed sequences.
  for_each_utf8_run(
      text, [&](size_t b, size_t e) { append_normalized(text.substr(b, e - b), options, out); },
      [&](size_t b, size_t e) { out.append(text.substr(b, e - b)); });
  return true;
}

}  // namespace nnsight
