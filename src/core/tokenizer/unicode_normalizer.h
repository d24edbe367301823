// Unicode normalization of text before pre-tokenization, as the `NFC`, `NFD`,
// `NFKC` and `NFKD` normalizers of Hugging Face tokenizer.json files do it
// (Qwen2, GPT-NeoX and Command-R files name NFC). Runs on utf8proc. The input
// may hold any bytes: each ill-formed UTF-8 sequence is kept as it is and
// normalization applies to the well-formed runs between them (Hugging Face
// only ever sees well-formed text).
#pragma once

#include <string>
#include <string_view>

namespace nnsight {

enum class UnicodeNormalization { kNone, kNfc, kNfd, kNfkc, kNfkd };

// "NFC" for kNfc and so on; "none" for kNone.
const char* unicode_normalization_name(UnicodeNormalization form);

// Writes `text` in normal form `form` to `out` (replacing its contents).
// Returns false, leaving `out` untouched, when `text` is known to be in that
// form already without normalizing it: kNone, and for NFC text with no code
// point at or above U+0300 (below which every character is NFC-stable), so
// that the common ASCII and Latin-1 case costs one pass and no copy.
bool unicode_normalize(std::string_view text, UnicodeNormalization form, std::string& out);

}  // namespace nnsight
