#include "core/tokenizer/rank_merges.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "core/tokenizer/byte_level.h"

namespace nnsight {

std::vector<std::string> merges_from_ranks(const std::vector<std::string>& tokens,
                                           const std::vector<int32_t>& token_types) {
  constexpr int32_t kControl = 3, kUserDefined = 4;
  const size_t n = tokens.size();
  std::vector<std::string> bytes(n);
  std::vector<bool> ranked(n, false);
  std::unordered_map<std::string, int32_t> rank_of;
  rank_of.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = token_types.empty() ? 1 : token_types[i];
    if (type == kControl || type == kUserDefined) continue;
    if (!byte_level_decode(tokens[i], &bytes[i]) || bytes[i].empty()) continue;
    ranked[i] = rank_of.emplace(bytes[i], static_cast<int32_t>(i)).second;
  }
  std::vector<std::tuple<int32_t, int32_t, int32_t>> merges;  // (merged, left, right)
  for (size_t i = 0; i < n; ++i) {
    if (!ranked[i] || bytes[i].size() < 2) continue;
    const std::string& b = bytes[i];
    for (size_t k = 1; k < b.size(); ++k) {
      auto l = rank_of.find(b.substr(0, k));
      if (l == rank_of.end() || l->second >= static_cast<int32_t>(i)) continue;
      auto r = rank_of.find(b.substr(k));
      if (r == rank_of.end() || r->second >= static_cast<int32_t>(i)) continue;
      merges.emplace_back(static_cast<int32_t>(i), l->second, r->second);
    }
  }
  std::sort(merges.begin(), merges.end());
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (const auto& [merged, left, right] : merges) out.push_back(tokens[size_t(left)] + " " + tokens[size_t(right)]);
  return out;
}

}  // namespace nnsight
