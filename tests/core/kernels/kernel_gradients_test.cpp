// Autograd through the hand-written kernels (core/kernels/kernel_gradients.h):
// for inputs that require grad, each kernel records itself, its forward stays
// the kernel's own (bitwise), and its input gradients equal plain autograd
// through an ATen formula written here.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstring>
#include <limits>
#include <vector>

#include "batching/flattener.h"
#include "core/kernels/linear.h"
#include "core/kernels/packed_linear.h"
#include "core/kernels/paged_attention.h"
#include "core/kernels/rms_norm.h"
#include "core/kernels/rotary.h"
#include "core/kv_cache.h"
#include "support/seq_slots.h"

namespace nnsight {
namespace {

// d(sum(f(x) * r)) / dx by autograd.
at::Tensor grad_of(const at::Tensor& y, const at::Tensor& x, const at::Tensor& r) {
  return torch::autograd::grad({(y * r).sum()}, {x})[0];
}

void expect_close(const at::Tensor& a, const at::Tensor& b, double tol = 1e-5) {
  ASSERT_EQ(a.sizes(), b.sizes());
  const double scale = std::max(1.0, b.abs().max().item<double>());
  EXPECT_LT((a - b).abs().max().item<double>() / scale, tol);
}

TEST(KernelGradients, Linear) {
  at::AutoGradMode on(true);
  at::manual_seed(3);
  at::Tensor w = at::randn({24, 16}), b = at::randn({24});
  at::Tensor x = at::randn({5, 16}).requires_grad_(true);
  at::Tensor y = kernels::linear(x, w, b);
  ASSERT_TRUE(y.requires_grad());
  {
    at::NoGradGuard off;
    EXPECT_TRUE(at::equal(y.detach(), kernels::linear(x.detach(), w, b)));  // the kernel's numbers
  }
  at::Tensor r = at::randn({5, 24});
  at::Tensor x2 = x.detach().clone().requires_grad_(true);
  expect_close(grad_of(y, x, r), grad_of(at::matmul(x2, w.t()) + b, x2, r));
}

TEST(KernelGradients, PackedLinear) {
  at::AutoGradMode on(true);
  // A Q8_0 matrix [16, 64]: each 34-byte block is an f16 scale and 32 int8 weights.
  const int64_t rows = 16, cols = 64, blocks = rows * cols / 32;
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * 34));
  at::Tensor scale = at::full({1}, 0.01, at::kFloat).to(at::kHalf);
  for (int64_t i = 0; i < blocks; ++i) {
    std::memcpy(bytes.data() + i * 34, scale.data_ptr(), 2);
    for (int j = 0; j < 32; ++j) bytes[i * 34 + 2 + j] = static_cast<uint8_t>((i * 37 + j * 11) % 255);
  }
  const kernels::PackedMatrix w = kernels::make_packed_matrix(kernels::PackedType::Q8_0, rows, cols, bytes.data());
  at::Tensor x = at::randn({3, cols}).requires_grad_(true);
  at::Tensor y = kernels::packed_linear(x, w, at::Tensor());
  ASSERT_TRUE(y.requires_grad());
  at::Tensor r = at::randn({3, rows});
  at::Tensor x2 = x.detach().clone().requires_grad_(true);
  expect_close(grad_of(y, x, r), grad_of(at::matmul(x2, w.dequantize().t()), x2, r));
}

TEST(KernelGradients, RmsNorm) {
  at::AutoGradMode on(true);
  at::Tensor w = at::randn({32});
  at::Tensor x = at::randn({6, 32}).requires_grad_(true);
  at::Tensor y = kernels::rms_norm(x, w, 1e-5);
  at::Tensor x2 = x.detach().clone().requires_grad_(true);
  at::Tensor ref = w * x2 * at::rsqrt(x2.pow(2).mean(-1, true) + 1e-5);
  at::Tensor r = at::randn({6, 32});
  expect_close(grad_of(y, x, r), grad_of(ref, x2, r));
}

TEST(KernelGradients, Rotary) {
  at::AutoGradMode on(true);
  kernels::RotaryEmbedding rope(8, 64, 10000.0, RopeScaling{});
  at::Tensor pos = at::tensor(std::vector<int64_t>{0, 3, 7, 20}, at::kLong);
  at::Tensor x = at::randn({4, 3, 8}).requires_grad_(true);
  at::Tensor y = x;
  rope.apply_(y, pos);  // a recorded copy: x itself is untouched
  ASSERT_FALSE(y.is_same(x));
  at::Tensor x2 = x.detach().clone().requires_grad_(true);
  at::Tensor ang = pos.to(at::kFloat).unsqueeze(1) * rope.inv_freq().unsqueeze(0);  // [4, 4]
  at::Tensor c = ang.cos().unsqueeze(1), s = ang.sin().unsqueeze(1);                // [4, 1, 4]
  at::Tensor a = x2.narrow(2, 0, 4), b = x2.narrow(2, 4, 4);
  at::Tensor ref = at::cat({a * c - b * s, b * c + a * s}, 2);
  expect_close(y.detach(), ref.detach());
  at::Tensor r = at::randn({4, 3, 8});
  expect_close(grad_of(y, x, r), grad_of(ref, x2, r));
}

// Dense causal attention of one sequence from plain ATen ops: q [n, H, d]
// at positions cached.., keys/values [cached + n, kvh, d].
at::Tensor dense_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t cached,
                           double scale) {
  const int64_t n = q.size(0), total = k.size(0), group = q.size(1) / k.size(1);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < q.size(1); ++h) {
    at::Tensor s = at::matmul(q.select(1, h), k.select(1, h / group).t()) * scale;  // [n, total]
    at::Tensor mask = at::arange(total).unsqueeze(0) > (at::arange(n) + cached).unsqueeze(1);
    s = s.masked_fill(mask, -std::numeric_limits<double>::infinity());
    heads.push_back(at::matmul(at::softmax(s, -1), v.select(1, h / group)));  // [n, d]
  }
  return at::stack(heads, 1);  // [n, H, d]
}

TEST(KernelGradients, AttentionWithCachedKeysAsConstants) {
  at::AutoGradMode on(true);
  at::manual_seed(5);
  const int64_t heads = 4, kvh = 2, d = 8, bs = 4;
  KVCache cache = KVCache::allocate(16, bs, kvh, d, at::kFloat);
  cache.key.normal_();
  cache.value.normal_();
  // Sequence A: 3 cached tokens + 4 new (blocks 5, 2); sequence B: a 5-token prefill (blocks 0, 7).
  const batching::SeqSlot a = testing::seq_slot(3, 4, {5, 2}), b = testing::seq_slot(0, 5, {0, 7});
  const batching::BatchMeta meta = batching::flatten_slots({a, b}, bs).meta;
  at::Tensor past_k = cache.key[5].narrow(0, 0, 3).clone(), past_v = cache.value[5].narrow(0, 0, 3).clone();
  at::Tensor q = at::randn({9, heads, d}).requires_grad_(true);
  at::Tensor k = at::randn({9, kvh, d}).requires_grad_(true);
  at::Tensor v = at::randn({9, kvh, d}).requires_grad_(true);
  at::Tensor out = kernels::attend(q, k, v, cache, meta, 0.35);
  ASSERT_TRUE(out.requires_grad());

  at::Tensor q2 = q.detach().clone().requires_grad_(true);
  at::Tensor k2 = k.detach().clone().requires_grad_(true);
  at::Tensor v2 = v.detach().clone().requires_grad_(true);
  at::Tensor ref = at::cat({dense_attention(q2.narrow(0, 0, 4), at::cat({past_k, k2.narrow(0, 0, 4)}),
                                            at::cat({past_v, v2.narrow(0, 0, 4)}), 3, 0.35),
                            dense_attention(q2.narrow(0, 4, 5), k2.narrow(0, 4, 5), v2.narrow(0, 4, 5), 0, 0.35)});
  expect_close(out.detach(), ref.detach());
  at::Tensor r = at::randn({9, heads, d});
  auto g = torch::autograd::grad({(out * r).sum()}, {q, k, v});
  auto g2 = torch::autograd::grad({(ref * r).sum()}, {q2, k2, v2});
  for (int i = 0; i < 3; ++i) expect_close(g[i], g2[i]);
}

TEST(KernelGradients, NothingRecordsWithoutAnInputThatRequiresGrad) {
  at::AutoGradMode on(true);
  at::Tensor w = at::randn({8, 16});
  at::Tensor y = kernels::linear(at::randn({2, 16}), w, at::Tensor());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(kernels::rms_norm(at::randn({2, 16}), at::ones({16}), 1e-5).requires_grad());
}

// q, k, v projections, rotary and attention composed as a model's attention
// runs them: the gradient reaches the block's input.
TEST(KernelGradients, AttentionBlockComposes) {
  at::AutoGradMode on(true);
  at::manual_seed(9);
  const int64_t T = 7, H = 4, KV = 2, d = 8, hid = 32, bs = 16;
  KVCache cache = KVCache::allocate(16, bs, KV, d, at::kFloat);
  const batching::BatchMeta meta = batching::flatten_slots({testing::seq_slot(0, T, {3})}, bs).meta;
  kernels::RotaryEmbedding rope(d, 64, 10000.0, RopeScaling{});
  at::Tensor wq = at::randn({H * d, hid}) * 0.3, wk = at::randn({KV * d, hid}) * 0.3,
             wv = at::randn({KV * d, hid}) * 0.3;
  at::Tensor h = at::randn({T, hid}).requires_grad_(true);
  at::Tensor q = kernels::linear(h, wq, at::Tensor()).reshape({T, H, d}).clone();
  at::Tensor k = kernels::linear(h, wk, at::Tensor()).reshape({T, KV, d}).clone();
  at::Tensor v = kernels::linear(h, wv, at::Tensor()).reshape({T, KV, d});
  rope.apply_(q, meta.positions);
  rope.apply_(k, meta.positions);
  at::Tensor o = kernels::attend(q, k, v, cache, meta, 0.35);
  at::Tensor h2 = h.detach().clone().requires_grad_(true);
  auto rot = [&](const at::Tensor& x) {
    at::Tensor ang = meta.positions.to(at::kFloat).unsqueeze(1) * rope.inv_freq().unsqueeze(0);
    at::Tensor c = ang.cos().unsqueeze(1), s = ang.sin().unsqueeze(1);
    at::Tensor a = x.narrow(2, 0, d / 2), b = x.narrow(2, d / 2, d / 2);
    return at::cat({a * c - b * s, b * c + a * s}, 2);
  };
  at::Tensor q2 = rot(at::matmul(h2, wq.t()).reshape({T, H, d}));
  at::Tensor k2 = rot(at::matmul(h2, wk.t()).reshape({T, KV, d}));
  at::Tensor v2 = at::matmul(h2, wv.t()).reshape({T, KV, d});
  at::Tensor o2 = dense_attention(q2, k2, v2, 0, 0.35);
  expect_close(o.detach(), o2.detach());
  at::Tensor r = at::randn({T, H, d});
  expect_close(grad_of(o, h, r), grad_of(o2, h2, r));
}
}  // namespace
}  // namespace nnsight
