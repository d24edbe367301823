#include "support/tp_trace_battery.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace nnsight::testing {

namespace {

Proxy value_of(LanguageModel& lm, const std::string& key) {
  const auto dot = key.rfind('.');
  const std::string path = key.substr(0, dot), what = key.substr(dot + 1);
  return what == "input" ? lm.envoy(path).input() : lm.envoy(path).output();
}

at::Tensor tokens_of(const TraceResult& out, size_t invoke) {
  const auto& ids = out.output(invoke).token_ids;
  return at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong);
}

SamplingParams greedy(int64_t n) { return SamplingParams().temperature(0).max_tokens(n).ignore_eos(true); }

}  // namespace

std::map<std::string, at::Tensor> run_trace_battery(LanguageModel& lm, const TraceBattery& b) {
  std::map<std::string, at::Tensor> r;
  // 1. Reads in two invokes (two requests in one batch): every value whole.
  {
    std::vector<std::vector<Saved>> saved(2, std::vector<Saved>(b.reads.size()));
    Saved logits[2];
    auto out = lm.trace(greedy(2), [&](Tracer& t) {
      for (size_t i = 0; i < 2; ++i)
        t.invoke(b.prompts[i], [&, i] {
          for (size_t k = 0; k < b.reads.size(); ++k) saved[i][k] = value_of(lm, b.reads[k]).save();
          logits[i] = lm.logits().save();
        });
    });
    for (size_t i = 0; i < 2; ++i) {
      for (size_t k = 0; k < b.reads.size(); ++k) r["read/" + std::to_string(i) + "/" + b.reads[k]] = out[saved[i][k]];
      r["read/" + std::to_string(i) + "/logits"] = out[logits[i]];
      r["read/tokens/" + std::to_string(i)] = tokens_of(out, i);
    }
  }
  // 2. Zeroing columns of a column-parallel output at every step.
  {
    Saved up, logits;
    auto out = lm.trace(b.prompts[0], greedy(3), [&](Tracer& t) {
      t.all([&](const Step&) {
        lm.envoy(b.up).output()[{Slice(), Slice(b.zero_from, std::nullopt)}] = 0;
        up = lm.envoy(b.up).output().save_each();
        logits = lm.logits().save_each();
      });
    });
    auto ups = out.list(up), ls = out.list(logits);
    for (size_t s = 0; s < ups.size(); ++s) r["zero/up/" + std::to_string(s)] = ups[s];
    for (size_t s = 0; s < ls.size(); ++s) r["zero/logits/" + std::to_string(s)] = ls[s];
    r["zero/tokens/0"] = tokens_of(out, 0);
  }
  // 3. Writes of an output and an input, a seeded random perturbation, and
  //    replaced samples; then the generation continues from them.
  {
    Saved scaled, halved, shrunk, logits;
    auto out = lm.trace(b.prompts[1], greedy(3), [&](Tracer& t) {
      t.iter(0, 2, [&](const Step& s) {
        lm.envoy(b.scaled_output).output() = lm.envoy(b.scaled_output).output() * 1.5;
        scaled = lm.envoy(b.scaled_output).output().save_each();
        lm.envoy(b.halved_input).input()[{Slice(), Slice(0, 8)}] = 0;
        halved = lm.envoy(b.halved_input).input().save_each();
        lm.envoy(b.halved_input).output() = lm.envoy(b.halved_input).output() * 0.9;
        shrunk = lm.envoy(b.halved_input).output().save_each();
        Proxy h = lm.envoy(b.up).output();
        lm.envoy(b.up).output() = h + randn_like(h, 11) * 0.1;
        logits = lm.logits().save_each();
        t.cond(s.index == 1, [&] { lm.samples() = at::full({1}, b.replacement_token, at::kLong); });
      });
    });
    auto a = out.list(scaled), h = out.list(halved), o = out.list(shrunk), l = out.list(logits);
    for (size_t s = 0; s < o.size(); ++s) r["write/shrunk/" + std::to_string(s)] = o[s];
    for (size_t s = 0; s < a.size(); ++s) r["write/scaled/" + std::to_string(s)] = a[s];
    for (size_t s = 0; s < h.size(); ++s) r["write/halved/" + std::to_string(s)] = h[s];
    for (size_t s = 0; s < l.size(); ++s) r["write/logits/" + std::to_string(s)] = l[s];
    r["write/tokens/0"] = tokens_of(out, 0);
  }
  // 4. One invoke over both prompts (docs/invokes.md): the rows of both,
  //    gathered whole and written back to each prompt's rows.
  {
    Saved up, logits;
    auto out = lm.trace(greedy(2), [&](Tracer& t) {
      t.invoke(b.prompts, [&] {
        t.all([&](const Step&) {
          lm.envoy(b.up).output()[{Slice(), Slice(b.zero_from, std::nullopt)}] = 0;
          up = lm.envoy(b.up).output().save_each();
          logits = lm.logits().save_each();
        });
      });
    });
    auto ups = out.list(up), ls = out.list(logits);
    for (size_t s = 0; s < ups.size(); ++s) r["multi/up/" + std::to_string(s)] = ups[s];
    for (size_t s = 0; s < ls.size(); ++s) r["multi/logits/" + std::to_string(s)] = ls[s];
    for (size_t i = 0; i < 2; ++i) r["multi/tokens/" + std::to_string(i)] = tokens_of(out, i);
  }
  // 5. Writes inside attention at every step: one head's probabilities zeroed
  //    (a head ablation) and each head's output scaled; under tensor
  //    parallelism the points gather the heads whole and re-shard the write.
  if (!b.attention.empty()) {
    Saved pattern, z, logits;
    auto out = lm.trace(b.prompts[0], greedy(3), [&](Tracer& t) {
      t.all([&](const Step&) {
        Envoy attn = lm.envoy(b.attention);
        attn["pattern"].output()[2] = 0;
        pattern = attn["pattern"].output().save_each();
        attn["z"].output() = attn["z"].output() * 1.25;
        z = attn["z"].output().save_each();
        logits = lm.logits().save_each();
      });
    });
    auto p = out.list(pattern), zs = out.list(z), ls = out.list(logits);
    EXPECT_EQ(p.size(), 3u);
    for (size_t s = 0; s < p.size(); ++s) {
      EXPECT_TRUE(p[s][2].eq(0).all().item<bool>()) << "step " << s << ": head 2 was not ablated";
      EXPECT_FALSE(p[s][1].eq(0).all().item<bool>()) << "step " << s << ": head 1 was ablated too";
      r["attn/pattern/" + std::to_string(s)] = p[s];
    }
    for (size_t s = 0; s < zs.size(); ++s) r["attn/z/" + std::to_string(s)] = zs[s];
    for (size_t s = 0; s < ls.size(); ++s) r["attn/logits/" + std::to_string(s)] = ls[s];
    r["attn/tokens/0"] = tokens_of(out, 0);
  }
  return r;
}

double expect_same_results(const std::map<std::string, at::Tensor>& expected,
                           const std::map<std::string, at::Tensor>& got, double tolerance) {
  double worst = 0;
  EXPECT_EQ(expected.size(), got.size());
  for (const auto& [name, e] : expected) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << "missing result " << name;
      continue;
    }
    const at::Tensor& g = it->second;
    if (e.sizes() != g.sizes()) {
      ADD_FAILURE() << name << ": shape " << e.sizes() << " vs " << g.sizes();
      continue;
    }
    if (name.find("/tokens/") != std::string::npos) {
      EXPECT_TRUE(at::equal(e, g)) << name << ": " << e << " vs " << g;
    } else {
      // Infinite entries (masked attention scores: -inf) must be equal; the rest within the tolerance.
      const at::Tensor ef = e.to(at::kFloat), gf = g.to(at::kFloat), finite = at::isfinite(ef);
      EXPECT_TRUE(at::equal(ef.masked_select(~finite), gf.masked_select(~finite))) << name;
      const double diff = finite.any().item<bool>() ? (ef - gf).masked_select(finite).abs().max().item<double>() : 0.0;
      EXPECT_LE(diff, tolerance) << name;
      worst = std::max(worst, diff);
    }
  }
  return worst;
}

}  // namespace nnsight::testing
