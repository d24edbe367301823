#include "runner/sampling/device_sampler.h"

#include <ATen/ATen.h>

#include <cstring>
#include <limits>

namespace nnsight::runner {

namespace {

// int64 bit patterns of splitmix64's constants (the arithmetic wraps).
int64_t bits(uint64_t u) {
  int64_t s;
  std::memcpy(&s, &u, sizeof s);
  return s;
}

// z >>> s on int64 tensors (ATen's >> is arithmetic).
at::Tensor shift_right(const at::Tensor& z, int s) {
  return at::bitwise_and(at::bitwise_right_shift(z, s), (int64_t{1} << (64 - s)) - 1);
}

}  // namespace

at::Tensor hashed_uniform(const at::Tensor& keys, const at::Tensor& ids) {
  // splitmix64(key + (id + 1) * golden) per element: [R, V] int64.
  at::Tensor z = keys.unsqueeze(1) + (ids + 1).unsqueeze(0) * bits(0x9e3779b97f4a7c15ull);
  z = at::bitwise_xor(z, shift_right(z, 30)) * bits(0xbf58476d1ce4e5b9ull);
  z = at::bitwise_xor(z, shift_right(z, 27)) * bits(0x94d049bb133111ebull);
  z = at::bitwise_xor(z, shift_right(z, 31));
  // The top 53 bits, centred in their interval: never 0 or 1.
  return (shift_right(z, 11).to(at::kDouble) + 0.5) * (1.0 / 9007199254740992.0);
}

at::Tensor sample_on_device(const at::Tensor& logits, const std::vector<const SamplingRow*>& rows) {
  TORCH_CHECK(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(rows.size()),
              "sample_on_device: expected [rows, vocab] logits, one row per SamplingRow");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  const c10::Device device = logits.device();
  if (n == 0) return at::empty({0}, at::TensorOptions().dtype(at::kLong).device(device));
  // Per-row parameters in one host tensor, one copy: temperature, top-k
  // (vocab where off), top-p, min-p, and the noise keys' bits.
  at::Tensor host = at::empty({5, n}, at::kDouble);
  auto* h = host.data_ptr<double>();
  std::vector<int64_t> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const SamplingRow& r = *rows[static_cast<size_t>(i)];
    TORCH_CHECK(r.temperature > 0.0, "sample_on_device: row ", i, " has no temperature (greedy rows take the argmax)");
    h[0 * n + i] = r.temperature;
    h[1 * n + i] = static_cast<double>(r.top_k > 0 && r.top_k < vocab ? r.top_k : vocab);
    h[2 * n + i] = r.top_p < 1.0 ? r.top_p : 2.0;  // off: no prefix's mass reaches 2
    h[3 * n + i] = r.min_p;
    keys[static_cast<size_t>(i)] = bits(mix_seed(r.seed, r.step));
  }
  const at::Tensor p = host.to(device);
  const at::Tensor key = at::tensor(keys, at::kLong).to(device);
  const at::Tensor temperature = p[0].to(at::kFloat).unsqueeze(1);
  const at::Tensor kth_index = (p[1].to(at::kLong) - 1).unsqueeze(1);
  const at::Tensor top_p = p[2].unsqueeze(1);
  const at::Tensor min_p = p[3].unsqueeze(1);

  at::Tensor x = logits.to(at::kFloat) / temperature;  // [R, V]
  auto [sorted, order] = x.sort(1, /*descending=*/true);
  // top-k: everything under the k-th largest (ties kept, as the CPU sampler does).
  x = x.masked_fill(x < sorted.gather(1, kth_index), -std::numeric_limits<float>::infinity());
  at::Tensor probs = at::softmax(x, 1).to(at::kDouble);
  // top-p: the smallest prefix (by probability) whose mass reaches top_p.
  at::Tensor ranked = probs.gather(1, order);
  ranked = ranked.masked_fill((ranked.cumsum(1) - ranked) >= top_p, 0.0);
  probs = at::zeros_like(probs).scatter_(1, order, ranked);
  // min-p: under min_p times the most likely token's probability.
  probs = probs.masked_fill(probs < min_p * std::get<0>(probs.max(1, /*keepdim=*/true)), 0.0);
  // The exponential race.
  const at::Tensor u = hashed_uniform(key, at::arange(vocab, at::TensorOptions().dtype(at::kLong).device(device)));
  return (probs / -at::log(u)).argmax(1);
}

}  // namespace nnsight::runner
