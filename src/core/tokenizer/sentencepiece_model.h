// Reading a SentencePiece model file (tokenizer.model: the ModelProto
// protobuf of google/sentencepiece) into a TokenizerSpec and pipeline.
//
// The protobuf is decoded directly (a few fields of a small, stable schema)
// rather than through libsentencepiece or libprotobuf: see docs/design.md.
// Supported: BPE models (trainer_spec.model_type = BPE) with any pieces
// (normal, unknown, control, user-defined, unused, byte), byte_fallback,
// and the normalizer options add_dummy_prefix, escape_whitespaces and
// remove_extra_whitespaces, provided there are no normalization rules
// (precompiled_charsmap empty: normalization "identity", as Llama 2,
// Mistral, Phi-3 and Gemma ship). Unigram models, NFKC rules and
// treat_whitespace_as_suffix are LoadErrors naming the file and the field.
#pragma once

#include <string>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_pipeline.h"
#include "core/tokenizer/tokenizer_spec.h"

namespace nnsight {

struct SentencePieceModelFile {
  TokenizerSpec spec;  // model "llama"; BOS added when the model has one
  TokenizerPipeline pipeline;
};

// Reads `bytes`, the contents of the file `path` (named in errors).
SentencePieceModelFile parse_sentencepiece_model(const std::string& bytes, const std::string& path);

// Reads the file, and tokenizer_config.json beside it when present
// (add_bos_token, add_eos_token, chat_template).
Tokenizer load_sentencepiece_model(const std::string& path);

}  // namespace nnsight
