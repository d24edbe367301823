// Reading Hugging Face tokenizer.json (and tokenizer_config.json beside it)
// into a TokenizerSpec plus the pipeline it spells out.
//
// Supported: model BPE over the byte-level alphabet (vocab, merges as "a b"
// strings or [a, b] pairs, unk_token, ignore_merges); added_tokens (special
// ones become control tokens, the others user-defined; both are matched whole
// in text); pre_tokenizer ByteLevel, Split (Regex or String pattern, any
// behavior, invert), Digits and Sequence of these, with ByteLevel last;
// normalizer null; decoder null or ByteLevel; post_processor null, ByteLevel,
// TemplateProcessing that adds at most one special token before and one after
// the text, or a Sequence of these. Files with neither a ByteLevel
// pre-tokenizer nor a ByteLevel decoder are SentencePiece-style (Llama 2,
// Mistral, Gemma): BPE with byte_fallback / fuse_unk, normalizers Prepend /
// Replace, pre-tokenizers Metaspace / Split / Digits, decoders Replace /
// ByteFallback / Fuse / Strip / Metaspace (core/tokenizer/spm_pipeline.h);
// a tokenizer_config.json naming LlamaTokenizer or GemmaTokenizer replaces
// that pipeline as transformers 5 does. Added tokens may set lstrip / rstrip. tokenizer_config.json supplies
// add_bos_token / add_eos_token and bos_token / eos_token / unk_token /
// pad_token, overriding what the post-processor template implies.
// Anything else is a LoadError naming the file, the key and the
// unsupported value.
#pragma once

#include <string>

#include "core/tokenizer/tokenizer_pipeline.h"
#include "core/tokenizer/tokenizer_spec.h"

namespace nnsight {

struct HfTokenizerFiles {
  TokenizerSpec spec;  // spec.pre is "" (the pipeline below replaces it)
  TokenizerPipeline pipeline;
};

HfTokenizerFiles read_hf_tokenizer_json(const std::string& path);

}  // namespace nnsight
