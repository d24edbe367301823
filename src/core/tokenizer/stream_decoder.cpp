#include "core/tokenizer/stream_decoder.h"

#include "core/tokenizer/utf8.h"

namespace nnsight {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens, bool starts_text)
    : tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      starts_text_(starts_text),
      at_start_(starts_text) {}

std::string StreamDecoder::push(int32_t id) {
  std::string out;
  // Validates id before changing anything; drops a SentencePiece dummy prefix.
  tokenizer_.append_decoded(id, skip_special_tokens_, at_start_, pending_);
  drain(out);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  drain(out);
  // What is left is a well-formed but unfinished sequence: one maximal subpart.
  if (!pending_.empty()) out += kUtf8Replacement;
  pending_.clear();
  at_start_ = starts_text_;
  return out;
}

void StreamDecoder::drain(std::string& out) {
  const std::string_view p = pending_;
  size_t i = 0;
  while (i < p.size()) {
    if (static_cast<uint8_t>(p[i]) < 0x80) {
      out.push_back(p[i++]);
      continue;
    }
    const Utf8Step s = utf8_step(p.substr(i));
    if (s.status == Utf8Status::kIncomplete) break;
    if (s.status == Utf8Status::kValid) {
      out.append(p.substr(i, s.length));
    } else {
      out += kUtf8Replacement;
    }
    i += s.length;
  }
  pending_.erase(0, i);
}

}  // namespace nnsight
