#include "runner/sampling/sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <limits>

#include "core/kernels/kernel_path.h"
#include "runner/sampling/device_sampler.h"
#include "runner/sampling/greedy.h"

namespace nnsight::runner {

namespace {

// Probabilities of one row after temperature and the top-k / top-p / min-p filters.
at::Tensor filtered_probs(const at::Tensor& row, const SamplingRow& r) {
  at::Tensor scaled = row / r.temperature;  // [V]
  const int64_t v = scaled.size(0);
  if (r.top_k > 0 && r.top_k < v) {
    const double kth = std::get<0>(at::topk(scaled, r.top_k)).min().item<double>();
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<float>::infinity());
  }
  at::Tensor probs = at::softmax(scaled, 0);
  if (r.top_p < 1.0) {
    auto sorted = at::sort(probs, 0, /*descending=*/true);
    at::Tensor p = std::get<0>(sorted), idx = std::get<1>(sorted);
    // Keep the smallest prefix whose mass reaches top_p (always the first token).
    at::Tensor before = at::cumsum(p, 0) - p;
    at::Tensor drop = before >= r.top_p;
    probs = probs.index_fill(0, idx.masked_select(drop), 0.0);
  }
  if (r.min_p > 0.0) {
    const double cutoff = r.min_p * probs.max().item<double>();
    probs = probs.masked_fill(probs < cutoff, 0.0);
  }
  return probs;
}

}  // namespace

uint64_t mix_seed(uint64_t seed, int64_t step) {
  // splitmix64 of (seed, step): decorrelates neighbouring steps and seeds.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(step + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

TokenLogprobs logprobs_of(const at::Tensor& row_logits, int32_t token, int64_t top_n) {
  at::Tensor lp = at::log_softmax(row_logits.to(at::kFloat), 0);
  TokenLogprobs out;
  out.token = token;
  out.logprob = lp[token].item<float>();
  if (top_n > 0) {
    auto top = at::topk(lp, std::min<int64_t>(top_n, lp.size(0)));
    at::Tensor values = std::get<0>(top), ids = std::get<1>(top);
    for (int64_t i = 0; i < values.size(0); ++i)
      out.top.emplace_back(static_cast<int32_t>(ids[i].item<int64_t>()), values[i].item<float>());
  }
  return out;
}

SamplerOutput sample(const at::Tensor& logits, const std::vector<SamplingRow>& rows) {
  TORCH_CHECK(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(rows.size()),
              "sample: expected [rows, vocab] logits, one row per SamplingRow");
  SamplerOutput out;
  out.logprobs.resize(rows.size());
  const bool on_device = !kernels::cpu_kernels_for(logits);
  // The rows that need more than their argmax on the host: sampling (on the
  // CPU kernels' path), log-probabilities.
  std::vector<int64_t> host_rows;
  for (size_t i = 0; i < rows.size(); ++i)
    if ((rows[i].temperature > 0.0 && !on_device) || rows[i].logprobs >= 0)
      host_rows.push_back(static_cast<int64_t>(i));
  at::Tensor cpu;  // [rows or host_rows, vocab] float32 on the host
  std::vector<int64_t> cpu_row(rows.size(), -1);
  if (!on_device) {
    cpu = logits.to(at::kCPU, at::kFloat).contiguous();
    out.tokens = cpu.size(0) > 0 ? greedy_tokens(cpu) : at::empty({0}, at::kLong);  // greedy for every row
    for (size_t i = 0; i < rows.size(); ++i) cpu_row[i] = static_cast<int64_t>(i);
  } else {
    // The device path: every row's argmax on the device, the sampling rows
    // sampled there too (device_sampler.h), one copy of the tokens; only the
    // rows that report log-probabilities come to the host whole (a
    // vocabulary of floats each).
    at::Tensor tokens = logits.size(0) > 0 ? logits.argmax(-1) : at::empty({0}, at::kLong);
    std::vector<int64_t> sampling;
    std::vector<const SamplingRow*> sampling_rows;
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].temperature > 0.0) {
        sampling.push_back(static_cast<int64_t>(i));
        sampling_rows.push_back(&rows[i]);
      }
    if (!sampling.empty()) {
      const at::Tensor idx = at::tensor(sampling, at::kLong).to(logits.device());
      tokens = tokens.index_copy(0, idx, sample_on_device(logits.index_select(0, idx), sampling_rows));
    }
    out.tokens = tokens.to(at::kCPU, at::kLong).contiguous();
    if (!host_rows.empty()) {
      at::Tensor idx = at::tensor(host_rows, at::kLong).to(logits.device());
      cpu = logits.index_select(0, idx).to(at::kCPU, at::kFloat).contiguous();
      for (size_t k = 0; k < host_rows.size(); ++k)
        cpu_row[static_cast<size_t>(host_rows[k])] = static_cast<int64_t>(k);
    }
  }
  auto* tok = out.tokens.data_ptr<int64_t>();
  for (int64_t i64 : host_rows) {
    const size_t i = static_cast<size_t>(i64);
    const SamplingRow& r = rows[i];
    const int64_t row = cpu_row[i];
    if (r.temperature > 0.0 && !on_device) {
      at::Tensor probs = filtered_probs(cpu[row], r);
      at::Generator gen = at::detail::createCPUGenerator(mix_seed(r.seed, r.step));
      at::Tensor e = at::empty_like(probs).exponential_(1.0, gen);
      tok[i] = (probs / e).argmax().item<int64_t>();
    }
    if (r.logprobs >= 0) out.logprobs[i] = logprobs_of(cpu[row], static_cast<int32_t>(tok[i]), r.logprobs);
  }
  return out;
}

}  // namespace nnsight::runner
