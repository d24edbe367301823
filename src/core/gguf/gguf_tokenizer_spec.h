// TokenizerSpec from a GGUF file's tokenizer.ggml.* metadata.
#pragma once

#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer_spec.h"

namespace nnsight {

// Reads tokens, merges, token types, pre-tokenizer name, special ids and the
// add_bos/add_eos flags; for SentencePiece vocabularies
// (tokenizer.ggml.model = "llama": Llama 2, Mistral, Phi-3, Gemma) also the
// scores and tokenizer.ggml.add_space_prefix (default true). Missing flags
// follow llama.cpp's defaults: add_bos for "llama" vocabularies and the
// Llama-3 pre-tokenizers, add_eos never. Throws LoadError for any other
// tokenizer.ggml.model, a "llama" vocabulary without scores, inconsistent
// array lengths, or special ids outside the vocabulary.
TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& file);

}  // namespace nnsight
