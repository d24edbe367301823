#include "core/kernels/kernel_gradients.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/kernels/linear.h"
#include "core/kernels/linear_input_grad.h"
#include "core/kernels/packed_linear.h"
#include "core/kernels/rms_norm.h"

namespace nnsight::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LinearFunction : torch::autograd::Function<LinearFunction> {
  // bias: optional, as autograd needs a defined tensor for every tensor input.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const c10::optional<at::Tensor>& bias) {
    ctx->saved_data["w"] = w;
    return linear(x, w, bias.value_or(at::Tensor()));  // grad mode is off here: the kernel runs
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor w = ctx->saved_data["w"].toTensor();                 // [N, K]
    return {linear_input_grad(grads[0], w), at::Tensor(), at::Tensor()};  // [..., N] x [N, K] -> [..., K]
  }
};

struct PackedLinearFunction : torch::autograd::Function<PackedLinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const PackedMatrix* w,
                            const c10::optional<at::Tensor>& bias) {
    // The matrix belongs to a module of the model, which outlives the graph.
    ctx->saved_data["w"] = reinterpret_cast<int64_t>(w);
    return packed_linear(x, *w, bias.value_or(at::Tensor()));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto* w = reinterpret_cast<const PackedMatrix*>(ctx->saved_data["w"].toInt());
    return {packed_linear_input_grad(grads[0], *w), at::Tensor(), at::Tensor()};  // [..., N] -> [..., K]
  }
};

struct RmsNormFunction : torch::autograd::Function<RmsNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps) {
    ctx->save_for_backward({x});
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["eps"] = eps;
    return rms_norm(x, weight, eps);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];  // [rows, hidden]
    const at::Tensor w = ctx->saved_data["weight"].toTensor();
    const double eps = ctx->saved_data["eps"].toDouble();
    // y = w x r with r = rsqrt(mean(x^2) + eps) per row, so with wg = w dy:
    // dx = r (wg - x r^2 mean(wg x)). In closed form rather than autograd
    // through the formula: 8 small ops instead of a nested graph of ~20, per
    // norm, twice per layer.
    const at::Tensor xf = x.to(at::kFloat);
    const at::Tensor r = at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);  // [rows, 1]
    const at::Tensor wg = grads[0].to(at::kFloat) * w.to(at::kFloat);            // [rows, hidden]
    const at::Tensor dx = r * (wg - xf * (r * r) * (wg * xf).mean(-1, /*keepdim=*/true));
    return {dx.to(x.scalar_type()), at::Tensor(), at::Tensor()};
  }
};

struct RotaryFunction : torch::autograd::Function<RotaryFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const RotaryEmbedding* rotary,
                            const at::Tensor& positions) {
    ctx->saved_data["rotary"] = reinterpret_cast<int64_t>(rotary);
    ctx->saved_data["positions"] = positions.clone();  // the step's buffer is reused next step
    at::Tensor y = x.clone();
    rotary->apply_(y, positions);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto* rotary = reinterpret_cast<const RotaryEmbedding*>(ctx->saved_data["rotary"].toInt());
    const at::Tensor positions = ctx->saved_data["positions"].toTensor();
    // The rotation's transpose is the rotation by minus the angle.
    const at::Tensor& g = grads[0];  // [T, heads, D]
    const int64_t half = rotary->head_dim() / 2;
    at::Tensor c = rotary->cos_table().to(g.device()).index_select(0, positions).unsqueeze(1).to(g.dtype());
    at::Tensor s = rotary->sin_table().to(g.device()).index_select(0, positions).unsqueeze(1).to(g.dtype());
    at::Tensor g1 = g.narrow(2, 0, half), g2 = g.narrow(2, half, half);
    at::Tensor dx = g.clone();
    dx.narrow(2, 0, half).copy_(g1 * c + g2 * s);
    dx.narrow(2, half, half).copy_(g2 * c - g1 * s);
    return {dx, at::Tensor(), at::Tensor()};
  }
};

// Rows of one sequence in the step and what its queries see.
struct SeqRows {
  int64_t start, length, cached;
};

struct AttentionFunction : torch::autograd::Function<AttentionFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            KVCache* cache, const batching::BatchMeta* meta, double scale, AttentionOptions options) {
    {
      // The cache is the engine's (an inference tensor in worker processes):
      // written outside the graph.
      c10::InferenceMode write_outside_graph;
      write_kv(*cache, k, v, *meta);
    }
    at::Tensor out = paged_attention(q, *cache, *meta, scale, options);  // [T, heads, d]
    // What the backward needs, copied now: later steps reuse the batch's
    // buffers and fill the cache further.
    const int64_t kvh = cache->num_kv_heads(), d = cache->head_dim(), bs = cache->block_size();
    const at::Tensor tables = meta->block_tables.to(at::kCPU, at::kLong);  // [S, max_blocks]
    std::vector<int64_t> seqs;
    c10::List<at::Tensor> past_k, past_v;
    for (int64_t s = 0; s < meta->num_seqs; ++s) {
      const int64_t cached = meta->cached_len(s);
      seqs.insert(seqs.end(), {meta->query_start_host[s], meta->query_len(s), cached});
      std::vector<int64_t> slots(static_cast<size_t>(cached));
      const auto* row = tables.data_ptr<int64_t>() + s * tables.size(1);
      for (int64_t p = 0; p < cached; ++p) slots[p] = row[p / bs] * bs + p % bs;
      const at::Tensor idx = at::tensor(slots, at::kLong).to(q.device());
      past_k.push_back(cache->key.view({-1, kvh, d}).index_select(0, idx));  // [cached, kv_heads, d]
      past_v.push_back(cache->value.view({-1, kvh, d}).index_select(0, idx));
    }
    ctx->save_for_backward({q, k, v});
    ctx->saved_data["seqs"] = seqs;
    ctx->saved_data["past_k"] = past_k;
    ctx->saved_data["past_v"] = past_v;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["window"] = options.sliding_window;
    ctx->saved_data["softcap"] = options.logit_softcap;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const std::vector<int64_t> seqs = ctx->saved_data["seqs"].toIntVector();
    const auto past_k = ctx->saved_data["past_k"].toTensorList();
    const auto past_v = ctx->saved_data["past_v"].toTensorList();
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t window = ctx->saved_data["window"].toInt();
    const double cap = ctx->saved_data["softcap"].toDouble();

    at::AutoGradMode on(true);
    at::Tensor q = saved[0].detach().requires_grad_(true);  // [T, heads, d]
    at::Tensor k = saved[1].detach().requires_grad_(true);  // [T, kv_heads, d]
    at::Tensor v = saved[2].detach().requires_grad_(true);
    const int64_t heads = q.size(1), group = heads / k.size(1);
    std::vector<at::Tensor> outs;
    for (size_t s = 0; s * 3 < seqs.size(); ++s) {
      const int64_t start = seqs[3 * s], n = seqs[3 * s + 1], cached = seqs[3 * s + 2];
      if (n == 0) continue;
      at::Tensor qs = q.narrow(0, start, n).to(at::kFloat).transpose(0, 1);                           // [heads, n, d]
      at::Tensor ks = at::cat({past_k.get(s).to(at::kFloat), k.narrow(0, start, n).to(at::kFloat)});  // [L, kv, d]
      at::Tensor vs = at::cat({past_v.get(s).to(at::kFloat), v.narrow(0, start, n).to(at::kFloat)});
      ks = ks.repeat_interleave(group, 1).permute({1, 2, 0});  // [heads, d, L]
      vs = vs.repeat_interleave(group, 1).transpose(0, 1);     // [heads, L, d]
      at::Tensor scores = at::matmul(qs, ks) * scale;          // [heads, n, L]
      if (cap > 0) scores = at::tanh(scores / cap) * cap;
      const int64_t total = cached + n;
      at::Tensor qpos = at::arange(cached, total, at::kLong).unsqueeze(1);  // [n, 1]
      at::Tensor kpos = at::arange(0, total, at::kLong).unsqueeze(0);       // [1, L]
      at::Tensor allowed = kpos <= qpos;
      if (window > 0) allowed = allowed.logical_and(kpos > qpos - window);
      scores = scores.masked_fill(allowed.logical_not().to(scores.device()), -std::numeric_limits<float>::infinity());
      outs.push_back(at::matmul(at::softmax(scores, -1), vs).transpose(0, 1));  // [n, heads, d]
    }
    at::Tensor out = at::cat(outs);  // [T, heads, d]
    variable_list g = torch::autograd::grad({out}, {q, k, v}, {grads[0].to(at::kFloat)}, /*retain_graph=*/false,
                                            /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t i = 0; i < 3; ++i) g[i] = g[i].defined() ? g[i].to(saved[i].scalar_type()) : at::zeros_like(saved[i]);
    return {g[0], g[1], g[2], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor linear_recorded(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  return LinearFunction::apply(x, w, bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt);
}

at::Tensor packed_linear_recorded(const at::Tensor& x, const PackedMatrix& w, const at::Tensor& bias) {
  return PackedLinearFunction::apply(x, &w, bias.defined() ? c10::optional<at::Tensor>(bias) : c10::nullopt);
}

at::Tensor rms_norm_recorded(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return RmsNormFunction::apply(x, weight, eps);
}

at::Tensor rotary_recorded(const RotaryEmbedding& rotary, const at::Tensor& x, const at::Tensor& positions) {
  return RotaryFunction::apply(x, &rotary, positions);
}

at::Tensor attend_recorded(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, KVCache& cache,
                           const batching::BatchMeta& meta, double scale, const AttentionOptions& options) {
  return AttentionFunction::apply(q, k, v, &cache, &meta, scale, options);
}

}  // namespace nnsight::kernels
