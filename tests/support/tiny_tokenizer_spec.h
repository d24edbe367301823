// A hand-made byte-level BPE vocabulary for tokenizer tests that need no
// file: five special tokens, the 256 byte tokens, and a dozen merges chosen so
// that merge order, tie-breaking and fallback to single bytes are all visible.
#pragma once

#include "core/tokenizer/tokenizer_spec.h"

namespace nnsight::testing {

// Ids: 0 "<s>" (control, BOS), 1 "</s>" (control, EOS), 2 "<|im_start|>"
// (control), 3 "<tool>" and 4 "<tool_call>" (user-defined); 5 + b is the token
// of byte b; merged tokens follow in merge order:
//   l l, h e, he ll, hell o, Ġ w, o r, Ġw or, Ġwor l, Ġworl d, a a, b c, a b, aa aa
// pre = "gpt2", add_bos = true, add_eos = false.
TokenizerSpec tiny_spec();

// Id of byte b's token in tiny_spec().
inline int32_t tiny_byte_id(unsigned char b) { return 5 + b; }

}  // namespace nnsight::testing
