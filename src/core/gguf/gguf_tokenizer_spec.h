// TokenizerSpec from a GGUF file's tokenizer.ggml.* metadata.
#pragma once

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer_spec.h"

namespace nnsight {

// Reads tokens, merges, token types, pre-tokenizer name, special ids and the
// add_bos/add_eos flags. Missing flags follow llama.cpp's defaults for BPE
// vocabularies: add_bos only for the Llama-3 pre-tokenizers, add_eos never.
// Throws LoadError for a vocabulary that is not byte-level BPE
// (tokenizer.ggml.model != "gpt2"), inconsistent array lengths, or special
// ids outside the vocabulary.
TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& file);

}  // namespace nnsight
