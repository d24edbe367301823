// Building batching::SeqSlot by hand in tests: a sequence with `cached`
// tokens in its blocks computing `tokens` (or `new_len` placeholder tokens,
// for tests that use only the BatchMeta) this step. Id 0 draws a fresh id (a
// request appears once per step).
#pragma once

#include <cstdint>
#include <vector>

#include "batching/seq_slot.h"

namespace nnsight::testing {

inline batching::SeqSlot seq_slot(int64_t cached, std::vector<int32_t> tokens, std::vector<int32_t> blocks,
                                  bool sample = true, uint64_t id = 0) {
  static uint64_t next_id = 1u << 30;
  batching::SeqSlot s;
  s.id = id != 0 ? id : next_id++;
  s.token_ids = std::move(tokens);
  s.num_computed = cached;
  s.block_table = std::move(blocks);
  s.sample = sample;
  return s;
}

inline batching::SeqSlot seq_slot(int64_t cached, int64_t new_len, std::vector<int32_t> blocks, bool sample = true,
                                  uint64_t id = 0) {
  return seq_slot(cached, std::vector<int32_t>(static_cast<size_t>(new_len), 0), std::move(blocks), sample, id);
}

}  // namespace nnsight::testing
