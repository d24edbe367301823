// Finds special tokens (control and user-defined tokens, or tokenizer.json
// added tokens) in raw text. They are matched before pre-tokenization, as
// whole strings, leftmost first and longest first at a position, so
// "<|im_start|>" becomes one token rather than being split by the regex.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nnsight {

class SpecialTokenMatcher {
 public:
  struct Match {
    size_t begin = 0;
    size_t length = 0;
    int32_t id = -1;
  };

  // Registers `text` (non-empty) as token `id`; a text registered twice keeps its first id.
  void add(std::string text, int32_t id);

  // The leftmost match starting at or after `from` (the longest one there);
  // length == 0 when there is none.
  Match find(std::string_view text, size_t from) const;

  bool empty() const { return count_ == 0; }

 private:
  struct Entry {
    std::string text;
    int32_t id;
  };
  // Candidates by first byte, longest first; most bytes start no special token
  // at all, which one table lookup settles.
  std::array<std::vector<Entry>, 256> by_first_byte_;
  size_t count_ = 0;
};

}  // namespace nnsight
