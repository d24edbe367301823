// Paged attention over long contexts: a query row's keys are cut into pieces
// of 256 positions (paged_attention.cpp, kKeyChunk), each a partial softmax,
// merged in order. The result equals the device-generic path, and its bits
// are the same whichever schedule computed the pieces: one decode row alone
// or among many sequences, on one thread or two (work items per sequence,
// piece and head), or inside a long prefill (one item per sequence and head,
// each row's pieces in turn).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "batching/flattener.h"
#include "core/kernels/paged_attention.h"
#include "core/kv_cache.h"
#include "support/bitwise_equal.h"
#include "support/seq_slots.h"

namespace nnsight {
namespace {

using testing::bitwise_equal;

constexpr int64_t kHeads = 5, kKvHeads = 1, kDim = 64, kBlock = 16;

std::vector<int32_t> block_range(int32_t first, int32_t count) {
  std::vector<int32_t> b(static_cast<size_t>(count));
  std::iota(b.begin(), b.end(), first);
  return b;
}

TEST(PagedAttentionPieces, LongContextsEqualTheGenericPath) {
  at::manual_seed(3);
  // A decode after 700 keys (3 pieces), a chunk of 40 rows crossing
  // position 512, a prefill of 300 (rows of one and of two pieces).
  const std::vector<batching::SeqSlot> slots = {testing::seq_slot(700, 1, block_range(0, 44)),
                                                testing::seq_slot(500, 40, block_range(44, 34)),
                                                testing::seq_slot(0, 300, block_range(78, 19))};
  const auto meta = batching::flatten_slots(slots, kBlock).meta;
  KVCache cache = KVCache::allocate(97, kBlock, kKvHeads, kDim, at::kFloat);
  cache.key.normal_();
  cache.value.normal_();
  const at::Tensor q = at::randn({meta.num_tokens, kHeads, kDim}) * 2;
  for (kernels::AttentionOptions o :
       {kernels::AttentionOptions{}, kernels::AttentionOptions{300, 0.0}, kernels::AttentionOptions{0, 2.0}}) {
    const at::Tensor a = kernels::paged_attention(q, cache, meta, 0.125, o);
    const at::Tensor b = kernels::paged_attention_generic(q, cache, meta, 0.125, o);
    EXPECT_LE((a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(), 1e-5)
        << "window " << o.sliding_window << " softcap " << o.logit_softcap;
  }
}

// Rows 597-599 of one sequence (pieces 0, 1 and 2): alone on one and on two
// threads, among 20 other sequences, and as the last rows of a 600-token
// prefill of the same keys and values.
void check_schedules(at::ScalarType dt) {
  at::manual_seed(5);
  const int64_t cached = 597, len = 3, total = cached + len;
  const int32_t seq_blocks = static_cast<int32_t>((total + kBlock - 1) / kBlock);  // 38
  const int64_t others = 20;
  KVCache cache = KVCache::allocate(seq_blocks * (others + 2), kBlock, kKvHeads, kDim, dt);
  cache.key.normal_();
  cache.value.normal_();
  const std::vector<int32_t> mine = block_range(0, seq_blocks);
  const at::Tensor q_prefill = at::randn({total, kHeads, kDim}).to(dt);
  const at::Tensor q_mine = q_prefill.narrow(0, cached, len).contiguous();
  const int saved = at::get_num_threads();
  for (kernels::AttentionOptions o : {kernels::AttentionOptions{}, kernels::AttentionOptions{400, 0.0}}) {
    const auto decode = batching::flatten_slots({testing::seq_slot(cached, len, mine)}, kBlock).meta;
    at::set_num_threads(1);
    const at::Tensor one_thread = kernels::paged_attention(q_mine, cache, decode, 0.2, o);
    at::set_num_threads(2);
    const at::Tensor two_threads = kernels::paged_attention(q_mine, cache, decode, 0.2, o);
    EXPECT_TRUE(bitwise_equal(one_thread, two_threads)) << c10::toString(dt) << " window " << o.sliding_window;

    // Among 20 other decoding sequences (ours in the middle).
    std::vector<batching::SeqSlot> crowd;
    std::vector<at::Tensor> qs;
    for (int64_t s = 0; s < others + 1; ++s) {
      if (s == others / 2) {
        crowd.push_back(testing::seq_slot(cached, len, mine));
        qs.push_back(q_mine);
      } else {
        const int64_t c = 100 + 23 * s;
        crowd.push_back(testing::seq_slot(c, 1, block_range(static_cast<int32_t>(seq_blocks * (s + 1)), seq_blocks)));
        qs.push_back(at::randn({1, kHeads, kDim}).to(dt));
      }
    }
    const auto crowded = batching::flatten_slots(crowd, kBlock).meta;
    const at::Tensor in_crowd = kernels::paged_attention(at::cat(qs, 0), cache, crowded, 0.2, o);
    EXPECT_TRUE(bitwise_equal(in_crowd.narrow(0, others / 2, len), one_thread))
        << c10::toString(dt) << " window " << o.sliding_window;

    // The whole prefill: 600 rows (their partials exceed the split form's scratch).
    const auto prefill = batching::flatten_slots({testing::seq_slot(0, total, mine)}, kBlock).meta;
    const at::Tensor all = kernels::paged_attention(q_prefill, cache, prefill, 0.2, o);
    EXPECT_TRUE(bitwise_equal(all.narrow(0, cached, len), one_thread))
        << c10::toString(dt) << " window " << o.sliding_window;
  }
  at::set_num_threads(saved);
}

TEST(PagedAttentionPieces, BitsDoNotDependOnTheSchedule) {
  check_schedules(at::kFloat);
  check_schedules(at::kBFloat16);
}

}  // namespace
}  // namespace nnsight
