#include "core/kernels/paged_attention_flash.h"

#include <ATen/ATen.h>
#include <torch/csrc/api/include/torch/version.h>

#include <atomic>
#include <numeric>
#include <optional>
#include <string>

#include "core/kernels/env_switch.h"
#include "core/kernels/kernel_gradients.h"
#include "core/kernels/paged_attention_batched.h"
#include "core/log.h"

// The varlen flash call with window sizes (LibTorch >= 2.6); older LibTorch
// (Debian's CPU build) compiles the gather and never takes the path.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
#define NNSIGHT_HAVE_FLASH_VARLEN 1
#else
#define NNSIGHT_HAVE_FLASH_VARLEN 0
#endif

namespace nnsight::kernels {
namespace {

EnvSwitch g_switch("NNSIGHT_FLASH_ATTENTION");
std::atomic<bool> g_refused{false};  // LibTorch refused a call: the padded path from then on
std::atomic<int64_t> g_calls{0};

}  // namespace

UseFlashAttention::UseFlashAttention(bool on) : before_(g_switch.set(on)) {}

UseFlashAttention::~UseFlashAttention() { g_switch.restore(before_); }

int64_t flash_attention_calls() { return g_calls.load(std::memory_order_relaxed); }

bool flash_attention_applies(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                             const AttentionOptions& options) {
  if (!NNSIGHT_HAVE_FLASH_VARLEN) return false;
  const auto st = q.scalar_type();
  return q.defined() && q.is_cuda() && !records_grad(q) && (st == at::kBFloat16 || st == at::kHalf) && q.dim() == 3 &&
         q.size(0) == meta.num_tokens && meta.num_seqs > 0 && q.size(2) % 8 == 0 && q.size(2) <= 256 &&
         q.size(2) == cache.head_dim() && cache.num_kv_heads() > 0 && q.size(1) % cache.num_kv_heads() == 0 &&
         cache.key.scalar_type() == st && cache.value.scalar_type() == st && cache.key.is_contiguous() &&
         cache.value.is_contiguous() && options.logit_softcap == 0.0 &&
         static_cast<int64_t>(meta.context_lens_host.size()) == meta.num_seqs &&
         static_cast<int64_t>(meta.query_start_host.size()) == meta.num_seqs + 1 && g_switch.on() &&
         !g_refused.load(std::memory_order_relaxed);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> gather_context(const KVCache& cache, const batching::BatchMeta& meta) {
  const int64_t seqs = meta.num_seqs, kvh = cache.num_kv_heads(), d = cache.head_dim(), bs = cache.block_size();
  TORCH_CHECK(static_cast<int64_t>(meta.context_lens_host.size()) == seqs, "gather_context: no host context lengths");
  // The total is known on the host: no synchronization for the sizes below.
  const int64_t total = std::accumulate(meta.context_lens_host.begin(), meta.context_lens_host.end(), int64_t{0});
  const auto long_opts = at::TensorOptions().dtype(at::kLong).device(cache.key.device());
  const at::Tensor ctx = meta.context_lens.to(long_opts);                          // [seqs]
  const at::Tensor cu = at::cat({at::zeros({1}, long_opts), at::cumsum(ctx, 0)});  // [seqs + 1]
  // [total]: the sequence of each key row (output_size given: no synchronization).
  const at::Tensor seq_of = at::repeat_interleave(ctx, c10::optional<int64_t>(total));
  const at::Tensor pos = at::arange(total, long_opts) - cu.index_select(0, seq_of);  // [total]: its position
  const at::Tensor tables = meta.block_tables.to(long_opts).reshape({-1});           // [seqs * max_blocks]
  const int64_t width = meta.block_tables.size(1);
  const at::Tensor slots = tables.index_select(0, seq_of * width + pos.div(bs, "floor")) * bs + pos.remainder(bs);
  at::Tensor k = cache.key.view({-1, kvh, d}).index_select(0, slots);  // [total, kv_heads, head_dim]
  at::Tensor v = cache.value.view({-1, kvh, d}).index_select(0, slots);
  return {std::move(k), std::move(v), cu.to(at::kInt)};
}

at::Tensor paged_attention_flash(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                                 double scale, const AttentionOptions& options) {
  TORCH_CHECK(flash_attention_applies(q, cache, meta, options), "paged_attention_flash: not a call it takes");
  auto [k, v, cu_k] = gather_context(cache, meta);
  const at::Tensor cu_q = meta.query_start.to(at::kInt).contiguous();  // [seqs + 1]
  std::optional<int64_t> left, right;
  if (options.sliding_window > 0) {
    left = options.sliding_window - 1;  // keys (p - W, p]: W of them, itself included
    right = 0;
  }
#if NNSIGHT_HAVE_FLASH_VARLEN
  try {
    auto out = at::_flash_attention_forward(q.contiguous(), k, v, cu_q, cu_k, meta.max_query_len, meta.max_context_len,
                                            /*dropout_p=*/0.0, /*is_causal=*/true,
                                            /*return_debug_mask=*/false, scale, left, right);
    g_calls.fetch_add(1, std::memory_order_relaxed);
    return std::get<0>(out);  // [num_tokens, heads, head_dim]
  } catch (const c10::Error& e) {
    // The padded path from now on; this call's result comes from it too.
    if (!g_refused.exchange(true))
      log_warning(std::string("flash attention unavailable, prefill steps use the padded attention: ") +
                  e.what_without_backtrace());
    return paged_attention_batched(q, cache, meta, scale, options);
  }
#else
  TORCH_CHECK(false, "paged_attention_flash: this LibTorch has no varlen flash attention");
#endif
}

}  // namespace nnsight::kernels
