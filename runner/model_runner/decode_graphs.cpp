#include "runner/model_runner/decode_graphs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "batching/batch_upload.h"

#ifndef NNSIGHT_TORCH_CUDA
#define NNSIGHT_TORCH_CUDA 0
#endif
#if NNSIGHT_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace nnsight::runner {

namespace {
std::atomic<bool> g_graphs_on{true};
}  // namespace

UseDecodeGraphs::UseDecodeGraphs(bool on) : before_(g_graphs_on.exchange(on)) {}
UseDecodeGraphs::~UseDecodeGraphs() { g_graphs_on.store(before_); }
bool UseDecodeGraphs::enabled() { return g_graphs_on.load(std::memory_order_relaxed); }

// One graph of a bucket: for one set of hooked modules.
struct DecodeGraphs::Captured {
  HookedModules hooked;
  at::Tensor logits;                    // [rows, vocab]: the graph's output
  std::vector<HookTaps::Event> events;  // where the hooks were due: the graph's copies of the values
#if NNSIGHT_TORCH_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif
};

struct DecodeGraphs::Bucket {
  std::unique_ptr<batching::BatchUploader> uploader;  // null on the CPU
  // The padded batch where the forward reads it: uploaded into the bucket's
  // buffers on a device, the padder's own buffers (also fixed) on the CPU.
  batching::DeviceBatch place(const batching::FlatBatch& padded) const {
    return uploader ? uploader->upload(padded) : batching::DeviceBatch{padded.token_ids, padded.meta};
  }
  batching::DeviceBatch inputs;                   // the fixed buffers its graphs read
  std::vector<std::unique_ptr<Captured>> graphs;  // one per hook set, made on first use
};

DecodeGraphs::DecodeGraphs(CausalLM& model, std::vector<KVCache>& kv, DecodeGraphOptions options)
    : model_(model),
      kv_(kv),
      options_(options),
      sizes_(bucket_sizes(options.max_rows)),
      padder_(options.max_rows, options.max_blocks_per_seq, options.block_size, options.scratch_block,
              options.max_context_len) {
  buckets_.resize(sizes_.size());
#if !NNSIGHT_TORCH_CUDA
  TORCH_CHECK(!options_.capture, "DecodeGraphs: CUDA graphs need a CUDA LibTorch");
#endif
  TORCH_CHECK(!options_.capture || model_.options().device().is_cuda(), "DecodeGraphs: CUDA graphs need a CUDA device");
}

DecodeGraphs::~DecodeGraphs() = default;

std::vector<int64_t> DecodeGraphs::bucket_sizes(int64_t max_rows) {
  std::vector<int64_t> s;
  for (int64_t b : {1, 2, 4})
    if (b < max_rows) s.push_back(b);
  for (int64_t b = 8; b < max_rows; b += 8) s.push_back(b);
  s.push_back(std::max<int64_t>(max_rows, 1));
  return s;
}

size_t DecodeGraphs::index_for(const batching::FlatBatch& batch) const {
  if (!batching::DecodePadder::is_decode(batch)) return sizes_.size();
  return static_cast<size_t>(std::lower_bound(sizes_.begin(), sizes_.end(), batch.meta.num_seqs) - sizes_.begin());
}

int64_t DecodeGraphs::bucket_for(const batching::FlatBatch& batch) const {
  const size_t i = index_for(batch);
  return i < sizes_.size() ? sizes_[i] : 0;
}

at::Tensor DecodeGraphs::forward_and_logits(const batching::DeviceBatch& inputs) {
  const at::Tensor hidden = model_.forward(inputs.token_ids, inputs.meta, kv_);
  return model_.compute_logits(hidden, inputs.meta.logits_rows);
}

DecodeGraphs::Bucket& DecodeGraphs::bucket(size_t i) {
  const int64_t rows = sizes_[i];
  if (!buckets_[i]) {
    auto b = std::make_unique<Bucket>();
    if (!model_.options().device().is_cpu())
      b->uploader = std::make_unique<batching::BatchUploader>(model_.options().device());
    // Its buffers' sizes are the bucket's, whatever the step: every later
    // upload lands at these addresses.
    b->inputs = b->place(padder_.pad(nullptr, rows));
    buckets_[i] = std::move(b);
  }
  return *buckets_[i];
}

bool DecodeGraphs::can_run(const batching::FlatBatch& batch, const HookedModules& hooked) const {
  if (index_for(batch) >= sizes_.size()) return false;
  return hooked.empty() || known_hook_set(hooked) || static_cast<int64_t>(hook_sets_.size()) < options_.max_hook_sets;
}

DecodeGraphs::Captured& DecodeGraphs::graph_for(Bucket& b, int64_t rows, const HookedModules& hooked) {
  for (auto& c : b.graphs)
    if (c->hooked == hooked) return *c;
  auto c = std::make_unique<Captured>();
  c->hooked = hooked;
  // A capture's warm-up forwards really run on the bucket's buffers and
  // write the cache at the slots they hold: padding rows only (the scratch
  // block), never the rows a previous step of this bucket uploaded, whose
  // blocks may belong to other requests by now.
  b.place(padder_.pad(nullptr, rows));
  if (options_.capture)
    capture(b, *c);
  else
    warm_up(b, *c);  // what a capture runs, without the capture (the CPU)
  if (!hooked.empty() && !known_hook_set(hooked)) hook_sets_.push_back(hooked);
  b.graphs.push_back(std::move(c));
  ++made_;
  return *b.graphs.back();
}

void DecodeGraphs::make_all() {
  // Largest first, as vLLM does: a smaller bucket's capture then finds the
  // pool's blocks the larger one freed big enough to reuse.
  for (size_t i = sizes_.size(); i-- > 0;) graph_for(bucket(i), sizes_[i], {});
}

at::Tensor DecodeGraphs::tapped_forward(const batching::DeviceBatch& inputs, Captured& c, bool keep_events) {
  // With hooked modules the forward records their values instead of calling
  // the hooks (which must not see the padding rows' values): captured, those
  // copies are what each replay refills.
  std::optional<HookTaps> taps;
  if (!c.hooked.empty()) taps.emplace();
  at::Tensor logits = forward_and_logits(inputs);
  if (keep_events && taps) c.events = taps->take_events();
  return logits;
}

void DecodeGraphs::warm_up(Bucket& b, Captured& c) {
  tapped_forward(b.inputs, c, false);
  tapped_forward(b.inputs, c, false);
}

bool DecodeGraphs::known_hook_set(const HookedModules& hooked) const {
  return std::find(hook_sets_.begin(), hook_sets_.end(), hooked) != hook_sets_.end();
}

void DecodeGraphs::capture(Bucket& b, Captured& c) {
#if NNSIGHT_TORCH_CUDA
  const c10::Device device = model_.options().device();
  const c10::cuda::CUDAGuard guard(device);
  const c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(device.index());
  if (!capture_stream_)
    capture_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()).unwrap();
  const c10::cuda::CUDAStream side(*capture_stream_);
  at::cuda::CUDAEvent uploaded;
  uploaded.record(main);
  uploaded.block(side);
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    // Warm-up on the capture stream: lazily made tables, cuBLAS handles and
    // workspaces (per stream) exist before the capture, which cannot make them.
    warm_up(b, c);
    side.synchronize();
    c.graph = std::make_unique<at::cuda::CUDAGraph>();
    // Thread-local capture: the result thread's event waits stay legal.
    c.graph->capture_begin(pool_.first || pool_.second ? pool_ : c10::MempoolId_t{0, 0},
                           cudaStreamCaptureModeThreadLocal);
    try {
      // The host fields it reads (fixed by the padder) are those of a batch
      // of padding rows: the same values every step reports.
      c.logits = tapped_forward(b.inputs, c, /*keep_events=*/true);
      c.graph->capture_end();
    } catch (...) {
      try {
        c.graph->capture_end();
      } catch (...) {
      }
      c.graph.reset();
      c.events.clear();
      throw;
    }
    pool_ = c.graph->pool();
  }
  at::cuda::CUDAEvent captured;
  captured.record(side);
  captured.block(main);
#else
  TORCH_CHECK(false, "DecodeGraphs: CUDA graphs need a CUDA LibTorch");
#endif
}

DecodeGraphs::Step DecodeGraphs::run(const batching::FlatBatch& batch, const HookedModules& hooked) {
  const size_t i = index_for(batch);
  TORCH_CHECK(i < sizes_.size(), "DecodeGraphs::run: not a decode step of at most ", options_.max_rows, " rows");
  TORCH_CHECK(can_run(batch, hooked), "DecodeGraphs::run: no graph may be made for another hook set");
  const int64_t rows = sizes_[i];
  Bucket& b = bucket(i);
  Captured* c = nullptr;
  batching::DeviceBatch up;
  at::Tensor logits;
  try {
    c = &graph_for(b, rows, hooked);
    up = b.place(padder_.pad(&batch, rows));
    TORCH_CHECK(up.token_ids.data_ptr() == b.inputs.token_ids.data_ptr() &&
                    up.meta.block_tables.data_ptr() == b.inputs.meta.block_tables.data_ptr(),
                "DecodeGraphs: a bucket's inputs moved");
#if NNSIGHT_TORCH_CUDA
    if (options_.capture) c->graph->replay();
#endif
  } catch (const std::exception& e) {
    throw GraphUnavailable(e.what());
  }
  if (options_.capture) {
    logits = c->logits;
  } else {
    // The step's host fields (the CPU kernels read them), or the fixed ones
    // a graph captured on padding rows would replay with.
    batching::DeviceBatch inputs = up;
    if (options_.fixed_host_fields) inputs.meta = b.inputs.meta;
    logits = tapped_forward(inputs, *c, /*keep_events=*/true);
  }
  ++replays_;
  const int64_t n = batch.meta.num_seqs;
  // The hooks see the step's rows only, in copies of their own.
  if (!hooked.empty()) {
    HookTaps::fire(c->events, n, rows);
    ++hooked_replays_;
  }
  Step s;
  s.logits = logits.narrow(0, 0, n);
  s.token_ids = up.token_ids.narrow(0, 0, n);
  s.meta = batch.meta;  // host fields
  s.meta.positions = up.meta.positions.narrow(0, 0, n);
  s.meta.slot_mapping = up.meta.slot_mapping.narrow(0, 0, n);
  s.meta.query_start = up.meta.query_start.narrow(0, 0, n + 1);
  s.meta.context_lens = up.meta.context_lens.narrow(0, 0, n);
  s.meta.block_tables = up.meta.block_tables.narrow(0, 0, n);
  s.meta.logits_rows = up.meta.logits_rows.narrow(0, 0, n);
  return s;
}

}  // namespace nnsight::runner
