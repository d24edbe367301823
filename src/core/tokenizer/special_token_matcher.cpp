#include "core/tokenizer/special_token_matcher.h"

#include <algorithm>
#include <cstring>

namespace nnsight {

void SpecialTokenMatcher::add(std::string text, int32_t id) {
  if (text.empty()) return;
  auto& bucket = by_first_byte_[static_cast<uint8_t>(text[0])];
  for (const Entry& e : bucket) {
    if (e.text == text) return;
  }
  // Keep the bucket sorted longest first; among equal lengths, insertion order.
  auto pos = std::find_if(bucket.begin(), bucket.end(), [&](const Entry& e) { return e.text.size() < text.size(); });
  bucket.insert(pos, Entry{std::move(text), id});
  ++count_;
}

SpecialTokenMatcher::Match SpecialTokenMatcher::find(std::string_view text, size_t from) const {
  if (count_ == 0) return Match{};
  for (size_t i = from; i < text.size(); ++i) {
    const auto& bucket = by_first_byte_[static_cast<uint8_t>(text[i])];
    for (const Entry& e : bucket) {
      if (e.text.size() <= text.size() - i && std::memcmp(e.text.data(), text.data() + i, e.text.size()) == 0) {
        return Match{i, e.text.size(), e.id};
      }
    }
  }
  return Match{};
}

}  // namespace nnsight
