// Tokenizer: byte-level BPE (GPT-2 style) for llama.cpp "gpt2"-model GGUF
// vocabularies and Hugging Face tokenizer.json files, and SentencePiece-style
// BPE ("▁" for spaces, "<0xXX>" byte fallback) for "llama"-model GGUF
// vocabularies, tokenizer.json files without ByteLevel and tokenizer.model
// (core/tokenizer/spm_pipeline.h; the rest of this comment is about the first).
//
// encode: special tokens (control / user-defined types, tokenizer.json added
// tokens) are cut out of the text first as whole tokens; the rest is
// pre-tokenized (PCRE2 regex splits), and each piece is BPE-merged from its
// raw bytes. Any byte sequence, UTF-8 or not, encodes, and decode returns
// exactly the original bytes. Copies share the immutable tables (and a
// thread-safe piece cache), so copying is cheap and every const method is
// safe to call from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer_pipeline.h"
#include "core/tokenizer/tokenizer_spec.h"

namespace nnsight {

class Tokenizer {
 public:
  // Builds from a spec whose pre-tokenizer is named by spec.pre (see
  // TokenizerPipeline::for_pre_name). Throws LoadError on an empty
  // vocabulary, a malformed merge, a merge naming a token (or producing a
  // concatenation) that is not in the vocabulary, token_types of the wrong
  // length or with unknown values, special ids out of range, add_bos/add_eos
  // without their token, or an unsupported pre-tokenizer.
  explicit Tokenizer(TokenizerSpec spec);
  // As above with an explicit pipeline (spec.pre is ignored). `source` (a file
  // name, say) starts every LoadError message.
  Tokenizer(TokenizerSpec spec, TokenizerPipeline pipeline, std::string source = "tokenizer");

  // Loads a Hugging Face tokenizer.json and, when present beside it,
  // tokenizer_config.json (add_bos_token / add_eos_token, bos_token /
  // eos_token). See core/tokenizer/tokenizer_json.h for what is supported.
  static Tokenizer from_hf_json(const std::string& path);

  // Token ids of `text` (any bytes). Special tokens in the text are always
  // matched; add_special_tokens adds BOS / EOS as the spec asks.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;

  // The exact bytes the ids stand for (not necessarily valid UTF-8 when the
  // ids split a character). skip_special_tokens drops control tokens.
  // Throws nnsight::Error on an id outside [0, vocab_size()).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // Appends what token `id` decodes to at this point of a text: its
  // token_bytes, except that a SentencePiece-style tokenizer drops the
  // dummy-prefix space at the start of the text. `at_text_start` is true
  // until something has been appended (the function clears it). Nothing is
  // appended for a control token when skip_special_tokens. Throws
  // nnsight::Error on an id out of range.
  void append_decoded(int32_t id, bool skip_special_tokens, bool& at_text_start, std::string& out) const;

  // Raw bytes of one token ("Ġthe" -> " the"; control tokens -> their text).
  // Throws nnsight::Error on an id out of range.
  std::string token_bytes(int32_t id) const;
  // The same without a copy; valid as long as any copy of this Tokenizer lives.
  std::string_view token_bytes_view(int32_t id) const;

  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t unk_id() const;
  int32_t pad_id() const;
  bool add_bos() const;
  bool add_eos() const;
  int64_t vocab_size() const;

  // The text of the BOS / EOS token ("" when there is none): what a chat
  // template sees as bos_token / eos_token.
  const std::string& bos_token() const;
  const std::string& eos_token() const;
  // The model's chat template (tokenizer_config.json "chat_template", GGUF
  // tokenizer.chat_template); empty when the model has none. Render it with
  // ChatTemplate (core/tokenizer/chat_template.h).
  const std::string& chat_template() const;

  // True for control tokens (type 3: BOS, EOS, "<|im_start|>", ...): the ones
  // skip_special_tokens drops. User-defined tokens are matched whole in text
  // but are ordinary text otherwise.
  bool is_special(int32_t id) const;

  // The id of a vocabulary entry spelled as stored ("Ġthe", "<|im_end|>").
  std::optional<int32_t> token_id(std::string_view token_string) const;
  // The stored spelling of a token. Throws nnsight::Error on an id out of range.
  const std::string& token_string(int32_t id) const;

  const TokenizerPipeline& pipeline() const;

 private:
  void init(TokenizerSpec spec, TokenizerPipeline pipeline, const std::string& source);

  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace nnsight
