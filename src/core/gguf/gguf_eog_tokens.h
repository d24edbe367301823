// The tokens llama.cpp ends generation at ("end-of-generation" ids,
// llama-vocab.cpp): beside the file's eos, end-of-turn and end-of-message
// ids, the fill-in-the-middle pad / repository / file-separator ids (from
// the file, else found by their text) and every token whose text is one of
// the end-of-turn spellings it knows (<|im_end|>, <end_of_turn>,
// <|endoftext|>, ...), with its two exceptions: <|end|> is not one where
// <|return|> and <|call|> are (gpt-oss), nor </s> where <|tool_response> is.
// So a GGUF model stops where llama.cpp stops on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight {

struct GgufSpecialIds {
  int64_t eos = -1, eot = -1, eom = -1;              // -1: not in the file
  int64_t fim_pad = -1, fim_rep = -1, fim_sep = -1;  // -1: found by text, if at all
};

// The end-of-generation ids, ascending, for the vocabulary `tokens` (ids
// outside it are left out).
std::vector<int64_t> llama_cpp_eog_ids(const std::vector<std::string>& tokens, const GgufSpecialIds& ids);

}  // namespace nnsight
