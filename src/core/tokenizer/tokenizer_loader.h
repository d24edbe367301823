// The tokenizer stored with a model: GGUF metadata (tokenizer.ggml.*), or the
// tokenizer.json of a Hugging Face directory, or its SentencePiece
// tokenizer.model when there is no tokenizer.json.
#pragma once

#include <string>

#include "core/tokenizer/tokenizer.h"

namespace nnsight {

// `model_path`: a .gguf file, a Hugging Face directory, or a .safetensors file
// in one. Throws LoadError naming the file when there is no usable tokenizer.
Tokenizer load_tokenizer_for_model(const std::string& model_path);

// False for a Hugging Face directory with neither tokenizer.json nor tokenizer.model
// (GGUF files always have one).
bool model_has_tokenizer(const std::string& model_path);

}  // namespace nnsight
