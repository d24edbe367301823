#include "runner/model_runner/decode_graphs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>

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

struct DecodeGraphs::Bucket {
  std::unique_ptr<batching::BatchUploader> uploader;  // null on the CPU
  // The padded batch where the forward reads it: uploaded into the bucket's
  // buffers on a device, the padder's own buffers (also fixed) on the CPU.
  batching::DeviceBatch place(const batching::FlatBatch& padded) const {
    return uploader ? uploader->upload(padded) : batching::DeviceBatch{padded.token_ids, padded.meta};
  }
  batching::DeviceBatch inputs;  // the fixed buffers the graph reads
  at::Tensor logits;             // [rows, vocab]: the graph's output
#if NNSIGHT_TORCH_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif
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
    if (options_.capture) capture(*b);
    buckets_[i] = std::move(b);
  }
  return *buckets_[i];
}

void DecodeGraphs::capture(Bucket& b) {
#if NNSIGHT_TORCH_CUDA
  const c10::Device device = model_.options().device();
  const c10::cuda::CUDAGuard guard(device);
  const c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(device.index());
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  at::cuda::CUDAEvent uploaded;
  uploaded.record(main);
  uploaded.block(side);
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    // Warm-up on the capture stream: lazily made tables, cuBLAS handles and
    // workspaces (per stream) exist before the capture, which cannot make them.
    forward_and_logits(b.inputs);
    forward_and_logits(b.inputs);
    side.synchronize();
    b.graph = std::make_unique<at::cuda::CUDAGraph>();
    // Thread-local capture: the result thread's event waits stay legal.
    b.graph->capture_begin(pool_.first || pool_.second ? pool_ : c10::MempoolId_t{0, 0},
                           cudaStreamCaptureModeThreadLocal);
    try {
      // The host fields it reads (fixed by the padder) are those of a batch
      // of padding rows: the same values every step reports.
      b.logits = forward_and_logits(b.inputs);
      b.graph->capture_end();
    } catch (...) {
      try {
        b.graph->capture_end();
      } catch (...) {
      }
      b.graph.reset();
      throw;
    }
    pool_ = b.graph->pool();
  }
  at::cuda::CUDAEvent captured;
  captured.record(side);
  captured.block(main);
  ++captured_;
#else
  TORCH_CHECK(false, "DecodeGraphs: CUDA graphs need a CUDA LibTorch");
#endif
}

DecodeGraphs::Step DecodeGraphs::run(const batching::FlatBatch& batch) {
  const size_t i = index_for(batch);
  TORCH_CHECK(i < sizes_.size(), "DecodeGraphs::run: not a decode step of at most ", options_.max_rows, " rows");
  const int64_t rows = sizes_[i];
  Bucket& b = bucket(i);
  const batching::DeviceBatch up = b.place(padder_.pad(&batch, rows));
  TORCH_CHECK(up.token_ids.data_ptr() == b.inputs.token_ids.data_ptr() &&
                  up.meta.block_tables.data_ptr() == b.inputs.meta.block_tables.data_ptr(),
              "DecodeGraphs: a bucket's inputs moved");
  at::Tensor logits;
  if (options_.capture) {
#if NNSIGHT_TORCH_CUDA
    b.graph->replay();
#endif
    logits = b.logits;
  } else {
    // The step's host fields (the CPU kernels read them), or the fixed ones
    // a graph captured on padding rows would replay with.
    batching::DeviceBatch inputs = up;
    if (options_.fixed_host_fields) inputs.meta = b.inputs.meta;
    logits = forward_and_logits(inputs);
  }
  ++replays_;
  const int64_t n = batch.meta.num_seqs;
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
