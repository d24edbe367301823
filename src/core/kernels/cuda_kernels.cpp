#include "core/kernels/cuda_kernels.h"

#include <ATen/ATen.h>

#include "core/kernels/env_switch.h"
#include "core/kernels/kernel_gradients.h"

#ifndef NNSIGHT_HAVE_CUDA_KERNELS
#define NNSIGHT_HAVE_CUDA_KERNELS 0
#endif

#if NNSIGHT_HAVE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/kernels/cuda/launch.h"
#endif

namespace nnsight::kernels {
namespace {

EnvSwitch g_switch("NNSIGHT_CUDA_KERNELS");

}  // namespace

bool cuda_kernels_built() { return NNSIGHT_HAVE_CUDA_KERNELS != 0; }

bool cuda_kernels_for(const at::Tensor& t) {
  if (!cuda_kernels_built() || !t.defined() || !t.is_cuda() || records_grad(t)) return false;
  const auto st = t.scalar_type();
  return (st == at::kFloat || st == at::kHalf || st == at::kBFloat16) && g_switch.on();
}

UseCudaKernels::UseCudaKernels(bool on) : before_(g_switch.set(on)) {}

UseCudaKernels::~UseCudaKernels() { g_switch.restore(before_); }

namespace cuda {

bool mixes_decodes_and_prefills(const batching::BatchMeta& meta) {
  if (static_cast<int64_t>(meta.query_start_host.size()) != meta.num_seqs + 1) return false;
  bool one = false, more = false;
  for (int64_t s = 0; s < meta.num_seqs; ++s) (meta.query_len(s) == 1 ? one : more) = true;
  return one && more;
}

}  // namespace cuda

#if NNSIGHT_HAVE_CUDA_KERNELS
namespace cuda {
namespace {

DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kHalf:
      return DType::kHalf;
    case at::kBFloat16:
      return DType::kBFloat16;
    default:
      TORCH_CHECK(t.scalar_type() == at::kFloat, "CUDA kernels: unsupported dtype ", t.scalar_type());
      return DType::kFloat;
  }
}

void* stream_of(const at::Tensor& t) {
  return static_cast<void*>(c10::cuda::getCurrentCUDAStream(t.device().index()).stream());
}

void check(const char* error, const char* what) { TORCH_CHECK(error == nullptr, what, ": CUDA error: ", error); }

}  // namespace

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& weight,
                                               double eps) {
  TORCH_CHECK(a.dim() == 2 && a.is_contiguous() && b.is_contiguous() && a.sizes().equals(b.sizes()) &&
                  weight.is_contiguous() && weight.numel() == a.size(1) && a.scalar_type() == b.scalar_type() &&
                  a.scalar_type() == weight.scalar_type(),
              "cuda::add_rms_norm: expected contiguous a, b [rows, hidden] and weight [hidden] of one dtype");
  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor sum = at::empty_like(a);
  at::Tensor out = at::empty_like(a);
  check(launch_add_rms_norm(dtype_of(a), a.data_ptr(), b.data_ptr(), weight.data_ptr(), sum.data_ptr(), out.data_ptr(),
                            a.size(0), a.size(1), static_cast<float>(eps), stream_of(a)),
        "add_rms_norm");
  return {std::move(sum), std::move(out)};
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && weight.is_contiguous() && weight.numel() == x.size(1) &&
                  x.scalar_type() == weight.scalar_type(),
              "cuda::rms_norm: expected contiguous x [rows, hidden] and weight [hidden] of one dtype");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty_like(x);
  check(launch_add_rms_norm(dtype_of(x), x.data_ptr(), nullptr, weight.data_ptr(), nullptr, out.data_ptr(), x.size(0),
                            x.size(1), static_cast<float>(eps), stream_of(x)),
        "rms_norm");
  return out;
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) {
  TORCH_CHECK(gate.dim() == 2 && gate.sizes().equals(up.sizes()) && gate.stride(1) == 1 && up.stride(1) == 1 &&
                  gate.scalar_type() == up.scalar_type(),
              "cuda::silu_mul: expected gate, up [rows, n] of one dtype with unit stride along n");
  const c10::cuda::CUDAGuard guard(gate.device());
  at::Tensor out = at::empty(gate.sizes(), gate.options());
  check(launch_silu_mul(dtype_of(gate), gate.data_ptr(), up.data_ptr(), out.data_ptr(), gate.size(0), gate.size(1),
                        gate.stride(0), up.stride(0), stream_of(gate)),
        "silu_mul");
  return out;
}

void rotary_qk_(at::Tensor& q, at::Tensor& k, const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin,
                int64_t rot_dim) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.is_contiguous() && k.is_contiguous() && q.size(0) == k.size(0) &&
                  q.scalar_type() == k.scalar_type() && cos.scalar_type() == q.scalar_type() &&
                  sin.scalar_type() == q.scalar_type() && cos.is_contiguous() && sin.is_contiguous() &&
                  positions.scalar_type() == at::kLong && positions.is_contiguous() && positions.numel() == q.size(0) &&
                  positions.device() == q.device() && q.size(2) >= rot_dim && k.size(2) >= rot_dim &&
                  cos.size(1) * 2 == rot_dim,
              "cuda::rotary_qk_: expected contiguous q, k [tokens, heads, >= rot_dim] and tables of q's dtype");
  const c10::cuda::CUDAGuard guard(q.device());
  check(launch_rotary_qk(dtype_of(q), q.data_ptr(), k.data_ptr(), positions.data_ptr<int64_t>(), cos.data_ptr(),
                         sin.data_ptr(), q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), rot_dim, stream_of(q)),
        "rotary_qk_");
}

namespace {

// The decode kernel's layout: q and the cache in one dtype, head_dim <= 256,
// int32 tables and lengths on q's device.
bool decode_kernel_takes(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta) {
  return cuda_kernels_for(q) && q.dim() == 3 && q.size(2) <= kDecodeAttentionMaxHeadDim &&
         q.size(2) == cache.head_dim() && cache.num_kv_heads() > 0 && q.size(1) % cache.num_kv_heads() == 0 &&
         cache.value.sizes() == cache.key.sizes() && cache.key.scalar_type() == q.scalar_type() &&
         cache.value.scalar_type() == q.scalar_type() && cache.key.is_contiguous() && cache.value.is_contiguous() &&
         meta.block_tables.scalar_type() == at::kInt && meta.context_lens.scalar_type() == at::kInt &&
         meta.block_tables.device() == q.device() && meta.context_lens.device() == q.device();
}

// Launches the decode kernel on the step's sequences: a decode step
// (query_start null) or, with meta.query_start, a mixed step's one-row ones.
void launch_decode(const at::Tensor& qc, const KVCache& cache, const batching::BatchMeta& meta, double scale,
                   const AttentionOptions& options, at::Tensor& out, const int32_t* query_start) {
  const c10::cuda::CUDAGuard guard(qc.device());
  at::Tensor tables = meta.block_tables.contiguous();
  at::Tensor lens = meta.context_lens.contiguous();
  DecodeAttentionArgs args;
  args.dtype = dtype_of(qc);
  args.q = qc.data_ptr();
  args.k_cache = cache.key.data_ptr();
  args.v_cache = cache.value.data_ptr();
  args.block_tables = tables.data_ptr<int32_t>();
  args.context_lens = lens.data_ptr<int32_t>();
  args.out = out.data_ptr();
  args.seqs = meta.num_seqs;
  args.heads = qc.size(1);
  args.kv_heads = cache.num_kv_heads();
  args.head_dim = qc.size(2);
  args.block_size = cache.block_size();
  args.max_blocks = tables.size(1);
  args.scale = static_cast<float>(scale);
  args.window = options.sliding_window;
  args.softcap = static_cast<float>(options.logit_softcap);
  args.query_start = query_start;
  check(launch_paged_decode_attention(args, stream_of(qc)), "paged_decode_attention");
}

}  // namespace

bool decode_attention_applies(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta) {
  return decode_kernel_takes(q, cache, meta) && meta.max_query_len == 1 && meta.num_tokens == meta.num_seqs &&
         q.size(0) == meta.num_seqs && meta.num_seqs <= 65535;
}

at::Tensor paged_decode_attention(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta,
                                  double scale, const AttentionOptions& options) {
  TORCH_CHECK(decode_attention_applies(q, cache, meta), "cuda::paged_decode_attention: not a decode step it takes");
  at::Tensor qc = q.contiguous();
  at::Tensor out = at::empty_like(qc);
  launch_decode(qc, cache, meta, scale, options, out, nullptr);
  return out;
}

bool redo_one_row_sequences(const at::Tensor& q, const KVCache& cache, const batching::BatchMeta& meta, double scale,
                            const AttentionOptions& options, at::Tensor& out) {
  if (!decode_kernel_takes(q, cache, meta) || q.size(0) != meta.num_tokens || !out.sizes().equals(q.sizes()) ||
      out.scalar_type() != q.scalar_type() || !out.is_contiguous() || out.device() != q.device())
    return false;
  if (meta.num_seqs > 65535 || !mixes_decodes_and_prefills(meta)) return false;
  if (meta.query_start.scalar_type() != at::kInt || meta.query_start.device() != q.device() ||
      meta.query_start.numel() != meta.num_seqs + 1)
    return false;
  const at::Tensor starts = meta.query_start.contiguous();  // [seqs + 1], on the device: no upload
  launch_decode(q.contiguous(), cache, meta, scale, options, out, starts.data_ptr<int32_t>());
  return true;
}

}  // namespace cuda
#else
namespace cuda {
namespace {
[[noreturn]] void not_built() {
  TORCH_CHECK(false, "the CUDA kernels are not in this build (a CPU LibTorch, or no nvcc at configure time)");
}
}  // namespace
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  not_built();
}
at::Tensor rms_norm(const at::Tensor&, const at::Tensor&, double) { not_built(); }
at::Tensor silu_mul(const at::Tensor&, const at::Tensor&) { not_built(); }
void rotary_qk_(at::Tensor&, at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t) {
  not_built();
}
bool decode_attention_applies(const at::Tensor&, const KVCache&, const batching::BatchMeta&) { return false; }
bool redo_one_row_sequences(const at::Tensor&, const KVCache&, const batching::BatchMeta&, double,
                            const AttentionOptions&, at::Tensor&) {
  return false;
}
at::Tensor paged_decode_attention(const at::Tensor&, const KVCache&, const batching::BatchMeta&, double,
                                  const AttentionOptions&) {
  not_built();
}
}  // namespace cuda
#endif

}  // namespace nnsight::kernels
