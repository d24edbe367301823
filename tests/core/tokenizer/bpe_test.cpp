// BpeModel's heap-based merge loop against a plain quadratic reference
// (rescan for the lowest-ranked, leftmost pair after every merge) on random
// vocabularies, plus hand-worked cases.
#include "core/tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <map>
#include <nnsight/error.hpp>
#include <random>
#include <string>
#include <vector>

namespace nnsight {
namespace {

struct RandomVocab {
  std::vector<std::string> tokens;  // id -> text
  std::vector<BpeMerge> merges;
  std::map<std::pair<std::string, std::string>, int> rank;
};

// Tokens "a".."d", then `n_merges` merges of random existing tokens.
RandomVocab make_vocab(std::mt19937& rng, int n_merges) {
  RandomVocab v;
  v.tokens = {"a", "b", "c", "d"};
  std::map<std::string, int32_t> id;
  for (int32_t i = 0; i < 4; ++i) id[v.tokens[size_t(i)]] = i;
  for (int tries = 0; int(v.merges.size()) < n_merges && tries < 10000; ++tries) {
    const int32_t l = int32_t(rng() % v.tokens.size());
    const int32_t r = int32_t(rng() % v.tokens.size());
    const std::string ls = v.tokens[size_t(l)], rs = v.tokens[size_t(r)];
    if (v.rank.count({ls, rs}) || ls.size() + rs.size() > 12) continue;
    int32_t merged;
    auto it = id.find(ls + rs);
    if (it == id.end()) {
      merged = int32_t(v.tokens.size());
      v.tokens.push_back(ls + rs);
      id[ls + rs] = merged;
    } else {
      merged = it->second;  // several merge paths may lead to one token
    }
    v.rank[{ls, rs}] = int(v.merges.size());
    v.merges.push_back(BpeMerge{l, r, merged});
  }
  return v;
}

std::vector<std::string> reference_bpe(const std::string& word, const RandomVocab& v) {
  std::vector<std::string> syms;
  for (char c : word) syms.emplace_back(1, c);
  while (true) {
    int best = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = v.rank.find({syms[i], syms[i + 1]});
      if (it != v.rank.end() && (best < 0 || it->second < best)) best = it->second, at = i;
    }
    if (best < 0) return syms;
    syms[at] += syms[at + 1];
    syms.erase(syms.begin() + long(at) + 1);
  }
}

TEST(Bpe, MatchesQuadraticReferenceOnRandomVocabularies) {
  std::mt19937 rng(1234);
  for (int vocab_round = 0; vocab_round < 20; ++vocab_round) {
    const RandomVocab v = make_vocab(rng, 5 + vocab_round * 10);
    std::array<int32_t, 256> byte_tokens;
    byte_tokens.fill(-1);
    for (int32_t i = 0; i < 4; ++i) byte_tokens[size_t('a' + i)] = i;
    const BpeModel model(byte_tokens, v.merges, -1);
    BpeScratch scratch;
    for (int w = 0; w < 300; ++w) {
      std::string word;
      const int n = 1 + int(rng() % (w < 290 ? 16 : 400));  // a few long words too
      for (int k = 0; k < n; ++k) word.push_back(char('a' + rng() % 4));
      std::vector<int32_t> ids;
      model.encode(word, ids, scratch);
      std::vector<std::string> got;
      for (int32_t id : ids) got.push_back(v.tokens[size_t(id)]);
      ASSERT_EQ(got, reference_bpe(word, v)) << "word " << word << " vocab round " << vocab_round;
    }
  }
}

TEST(Bpe, LowerRankWinsAndTiesGoLeftmost) {
  // ids: a=0 b=1 c=2, ab=3, bc=4, aa=5
  std::array<int32_t, 256> bytes;
  bytes.fill(-1);
  bytes['a'] = 0, bytes['b'] = 1, bytes['c'] = 2;
  const std::vector<BpeMerge> merges = {{1, 2, 4} /* b c */, {0, 1, 3} /* a b */, {0, 0, 5}};
  const BpeModel model(bytes, merges, -1);
  BpeScratch s;
  std::vector<int32_t> out;
  model.encode("abc", out, s);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 4}));  // "b c" (rank 0) beats "a b" (rank 1)
  out.clear();
  model.encode("aaa", out, s);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 0}));  // leftmost "a a" first
  EXPECT_EQ(model.rank(0, 1), 1);
  EXPECT_EQ(model.rank(1, 0), -1);
}

TEST(Bpe, ByteWithoutTokenUsesUnkOrThrows) {
  std::array<int32_t, 256> bytes;
  bytes.fill(-1);
  bytes['a'] = 0;
  BpeScratch s;
  std::vector<int32_t> out;
  const BpeModel with_unk(bytes, {}, 7);
  with_unk.encode("a\xFF", out, s);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 7}));
  const BpeModel without_unk(bytes, {}, -1);
  try {
    without_unk.encode("a\xFF", out, s);
    FAIL() << "expected nnsight::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0xFF"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nnsight
