#include "support/tiny_tokenizer_spec.h"

#include "core/tokenizer/byte_level.h"

namespace nnsight::testing {

TokenizerSpec tiny_spec() {
  TokenizerSpec spec;
  spec.tokens = {"<s>", "</s>", "<|im_start|>", "<tool>", "<tool_call>"};
  spec.token_types = {3, 3, 3, 4, 4};
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(byte_level_encode(std::string(1, static_cast<char>(b))));
    spec.token_types.push_back(1);
  }
  spec.merges = {"l l",    "h e",     "he ll", "hell o", "Ġ w", "o r",  "Ġw or",
                 "Ġwor l", "Ġworl d", "a a",   "b c",    "a b", "aa aa"};
  for (const std::string& m : spec.merges) {
    const size_t sep = m.find(' ');
    spec.tokens.push_back(m.substr(0, sep) + m.substr(sep + 1));
    spec.token_types.push_back(1);
  }
  spec.pre = "gpt2";
  spec.bos_id = 0;
  spec.eos_id = 1;
  spec.add_bos = true;
  spec.add_eos = false;
  return spec;
}

}  // namespace nnsight::testing
