// DecodeGraphs: decode steps replayed from captured CUDA graphs, as vLLM
// does. A step whose every row is one token of an untraced request is padded
// to the next bucket size (batching::DecodePadder: 1, 2, 4, 8, then
// multiples of 8 up to max_num_seqs), its inputs land in that bucket's fixed
// device buffers in one host-to-device copy, and the bucket's graph -- the
// whole forward and the logits, captured once -- is replayed: one launch
// where the eager step launches a few hundred kernels, each paying the
// host's launch cost.
//
// Every bucket's plain graph (no hooks) is captured when the engine starts,
// as vLLM does (make_all; ModelRunner on a CUDA device), so no early step
// pays for a capture; a graph with hooked modules is captured the first time
// a step needs it. Each capture runs two warm-up forwards, then the capture,
// on a side stream; all share one memory pool. A graph replays exactly the
// kernels it recorded, so the runner uses one only where nothing else must
// run inside the forward: no hook that
// writes (a steering trace, forward-hook configs, capture), no gradients,
// one rank; other steps run eager. Decode attention
// must read everything from device memory (kernels::cuda's decode kernel):
// the runner asks for graphs only where that kernel runs.
//
// A step whose modules carry hooks that only read (a trace that saves;
// StepObserver::deferrable_hooks) replays a graph of its own, captured with
// those modules hooked: where each hook was due, the graph copies the
// module's values into memory it keeps (core/hook_taps.h), and after the
// replay the hooks run, in forward order, on the step's rows of them. Such
// graphs are keyed by the hooked modules; `max_hook_sets` of them at most.
//
// On a device without graphs (the CPU; `capture(false)`) the same padded
// buffers run the forward eagerly (with the same deferred hooks): the tests
// check the padding there.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "batching/batch_upload.h"
#include "batching/decode_padder.h"
#include "batching/flattener.h"
#include "core/hook_taps.h"
#include "core/kv_cache.h"
#include "models/causal_lm.h"

namespace nnsight::runner {

// Turns graph replays off (or on) for its lifetime, process-wide: benches
// compare a step replayed with the same step eager on one engine.
// Thrown by DecodeGraphs::run when the step's graph could not be captured or
// replayed (nothing of the step ran): the step may run eager instead.
struct GraphUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A module whose hooks a graph defers, and which of them.
struct HookedModule {
  Module* module = nullptr;
  bool before = false;  // pre-hooks
  bool after = false;   // forward hooks
  bool operator==(const HookedModule& o) const { return module == o.module && before == o.before && after == o.after; }
};
using HookedModules = std::vector<HookedModule>;

class UseDecodeGraphs {
 public:
  explicit UseDecodeGraphs(bool on);
  ~UseDecodeGraphs();
  UseDecodeGraphs(const UseDecodeGraphs&) = delete;
  UseDecodeGraphs& operator=(const UseDecodeGraphs&) = delete;
  static bool enabled();

 private:
  bool before_;
};

struct DecodeGraphOptions {
  int64_t max_rows = 64;           // the largest bucket (the engine's max_num_seqs)
  int64_t max_blocks_per_seq = 1;  // the block tables' width
  int64_t block_size = 16;         // tokens per cache block
  int32_t scratch_block = 0;       // a cache block no request owns (padding rows write there)
  int64_t max_context_len = 8192;  // the engine's max_model_len
  bool capture = true;             // false: run the padded forward eagerly (tests)
  bool fixed_host_fields = false;  // eager runs see the bucket's fixed host fields, as a replayed graph does
  int64_t max_hook_sets = 8;       // distinct sets of deferred hooks with graphs of their own (all buckets)

  DecodeGraphOptions& rows(int64_t v) {
    max_rows = v;
    return *this;
  }
  DecodeGraphOptions& blocks_per_seq(int64_t v) {
    max_blocks_per_seq = v;
    return *this;
  }
  DecodeGraphOptions& block(int64_t v) {
    block_size = v;
    return *this;
  }
  DecodeGraphOptions& scratch(int32_t v) {
    scratch_block = v;
    return *this;
  }
  DecodeGraphOptions& context(int64_t v) {
    max_context_len = v;
    return *this;
  }
  DecodeGraphOptions& as_replayed(bool v) {
    fixed_host_fields = v;
    return *this;
  }
  DecodeGraphOptions& captured(bool v) {
    capture = v;
    return *this;
  }
  DecodeGraphOptions& hook_sets(int64_t v) {
    max_hook_sets = v;
    return *this;
  }
};

class DecodeGraphs {
 public:
  DecodeGraphs(CausalLM& model, std::vector<KVCache>& kv, DecodeGraphOptions options);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // The bucket sizes for a largest bucket of max_rows: 1, 2, 4, 8, 16, 24, ...
  static std::vector<int64_t> bucket_sizes(int64_t max_rows);
  // The bucket that holds this step, or 0 (not a decode step, or too many rows).
  int64_t bucket_for(const batching::FlatBatch& batch) const;

  struct Step {
    at::Tensor logits;         // [num_seqs, vocab]: a view of the bucket's output, valid until the next run
    at::Tensor token_ids;      // [num_seqs] on the device: the step's rows of the bucket's inputs
    batching::BatchMeta meta;  // the step's rows of the bucket's inputs (host fields the step's own)
  };
  // Whether run(batch, hooked) may replay a graph: the bucket's graph for
  // `hooked` exists, or another hook set may still have graphs.
  bool can_run(const batching::FlatBatch& batch, const HookedModules& hooked) const;
  // Runs a decode step (bucket_for(batch) > 0) through its bucket's graph
  // for `hooked` (empty: no module is hooked), then fires the deferred hooks.
  // GraphUnavailable when the graph failed; a hook's exception passes through.
  Step run(const batching::FlatBatch& batch, const HookedModules& hooked = {});

  // Every bucket's plain graph (no hooked modules), made now where missing:
  // what a first step of each bucket would make. Throws what a capture throws.
  void make_all();
  // Graphs made, captured or (on the CPU) run eagerly on padding rows.
  int64_t graphs_made() const { return made_; }
  int64_t graphs_captured() const { return options_.capture ? made_ : 0; }  // of them: CUDA graphs
  int64_t replays() const { return replays_; }
  int64_t hooked_replays() const { return hooked_replays_; }  // of replays(): with deferred hooks

 private:
  struct Bucket;
  struct Captured;
  size_t index_for(const batching::FlatBatch& batch) const;  // sizes_.size() when no bucket holds it
  Bucket& bucket(size_t index);                              // made (and captured) on first use
  at::Tensor forward_and_logits(const batching::DeviceBatch& inputs);
  // The bucket's graph for `hooked`, made (and captured) on first use.
  Captured& graph_for(Bucket& b, int64_t rows, const HookedModules& hooked);
  // The forward on `inputs`, the hooks of c.hooked recorded (kept in c.events if asked).
  at::Tensor tapped_forward(const batching::DeviceBatch& inputs, Captured& c, bool keep_events);
  bool known_hook_set(const HookedModules& hooked) const;  // some bucket has a graph for it
  void warm_up(Bucket& b, Captured& c);                    // the forwards a capture runs first
  void capture(Bucket& b, Captured& c);

  CausalLM& model_;
  std::vector<KVCache>& kv_;
  DecodeGraphOptions options_;
  std::vector<int64_t> sizes_;
  std::vector<std::unique_ptr<Bucket>> buckets_;  // one per size, made on first use
  batching::DecodePadder padder_;
  std::pair<unsigned long long, unsigned long long> pool_{0, 0};  // the graphs' shared memory pool
  // The one stream every capture runs on (taken at the first): the caching
  // allocator keeps a pool's free blocks per stream, so captures on one
  // stream reuse what the others freed, and share one cuBLAS workspace.
  std::optional<c10::Stream> capture_stream_;
  std::vector<HookedModules> hook_sets_;  // with graphs in some bucket (HookedModules{} not counted)
  int64_t made_ = 0, replays_ = 0, hooked_replays_ = 0;
};

}  // namespace nnsight::runner
