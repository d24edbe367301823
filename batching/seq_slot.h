// SeqSlot: one sequence's part in a step, as the scheduler hands it to the
// workers and the flattener lays it out. The new tokens token_ids sit at
// positions [num_computed, num_computed + token_ids.size()) of the sequence;
// the keys/values of the earlier positions are already in its blocks.
#pragma once

#include <cstdint>
#include <vector>

namespace nnsight::batching {

struct SeqSlot {
  uint64_t id = 0;                   // request id
  std::vector<int32_t> token_ids;    // tokens computed this step
  int64_t num_computed = 0;          // tokens already in the KV cache (position of token_ids[0])
  std::vector<int32_t> block_table;  // every block of the sequence, in order
  bool sample = false;               // this step reaches its last known token: sample the next
  int64_t num_generated = 0;         // output tokens before this step (the generation step)
  bool recompute = false;            // re-prefill after preemption (tokens were computed before)

  int64_t num_new() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t context_len() const { return num_computed + num_new(); }

  // cereal (the wire format); a template, so this header needs no cereal include.
  template <class A>
  void serialize(A& ar) {
    ar(id, token_ids, num_computed, block_table, sample, num_generated, recompute);
  }
};

}  // namespace nnsight::batching
