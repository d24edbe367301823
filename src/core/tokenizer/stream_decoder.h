// StreamDecoder: detokenizes one token at a time for streaming output. A
// token may end in the middle of a UTF-8 character (emoji are often two or
// three byte-level tokens), so bytes that could still become a character are
// held back until the next tokens complete it. Output is always valid UTF-8:
// bytes that can never form a character are replaced by U+FFFD, one per
// maximal ill-formed subpart (the Unicode-recommended practice, which is
// also what Python's errors="replace" does). For ids whose bytes are valid
// UTF-8, the concatenated output equals Tokenizer::decode.
#pragma once

#include <cstdint>
#include <string>

#include "core/tokenizer/tokenizer.h"

namespace nnsight {

class StreamDecoder {
 public:
  // Keeps a (cheap, shared) copy of the tokenizer. `starts_text`: the first
  // token begins a text, so a SentencePiece-style tokenizer drops its
  // dummy-prefix space as Tokenizer::decode does; false for tokens that
  // continue a prompt (generated text), whose leading space is real.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false, bool starts_text = true);

  // The text that token `id` completes (possibly empty). Throws nnsight::Error
  // on an id out of range, leaving the decoder unchanged.
  std::string push(int32_t id);

  // Emits whatever is held back (an unfinished character becomes U+FFFD) and
  // resets the decoder for a new stream.
  std::string flush();

  // Bytes held back, waiting for the rest of their character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  // Moves every settled character of pending_ to `out`.
  void drain(std::string& out);

  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
  bool starts_text_;
  bool at_start_;  // nothing decoded yet in a stream that starts a text
};

}  // namespace nnsight
