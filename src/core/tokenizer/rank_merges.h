// BPE merges for a vocabulary given only as ranks (tiktoken files: Kimi K2's
// GGUF carries no tokenizer.ggml.merges). The merges are derived the way
// transformers converts tiktoken vocabularies: every split of a token's bytes
// into two tokens of lower rank is a merge, ordered by the merged token's
// rank (then by the left and right parts' ranks). A token's rank is its id.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnsight {

// `tokens`: byte-level spellings ("Ġthe") in id order; `token_types`: GGUF
// types per id, or empty. Control and user-defined tokens take no part.
// Returns merges as "left right" spellings, in rank order.
std::vector<std::string> merges_from_ranks(const std::vector<std::string>& tokens,
                                           const std::vector<int32_t>& token_types);

}  // namespace nnsight
