// The attention internals of every architecture (q, k, v, scores, pattern,
// z, resid_mid: models/attention_points.h) against transformers' eager
// attention on the tiny fixture checkpoints: tests/data/attention/<arch>/,
// written by scripts/make-attention-fixtures (transformers 5.x) from
// tests/data/models-v5/<arch> (GPT-2 has a checkpoint of its own there).
//
// For each architecture, through the paged cache as the model runner drives
// it: the prompt in one step; the same prompt in three chunks (8 + 7 + 6
// tokens, each step's pattern over every key cached so far); the prompt in a
// batch with another sequence whose pattern nobody watches (its rows keep the
// fused kernel: bitwise the logits of a batch without hooks); and a head
// ablation written through the pattern hook, which must give transformers'
// logits with that head's probabilities zeroed.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <numeric>

#include "batching/flattener.h"
#include "core/hook_point.h"
#include "core/kv_cache.h"
#include "core/safetensors/safetensors_file.h"
#include "core/weight_source.h"
#include "models/causal_lm.h"
#include "support/seq_slots.h"

namespace nnsight {
namespace {

const std::vector<std::string> kArchs = {"llama",   "mistral",     "qwen2",    "qwen3",     "gemma",
                                         "gemma2",  "gemma3_text", "gpt_neox", "olmo2",     "olmo3",
                                         "smollm3", "phi3",        "mixtral",  "qwen3_moe", "gpt2"};
const char* const kPoints[] = {"q", "k", "v", "scores", "pattern", "z"};
constexpr double kTol = 1e-5;

std::string data_dir() { return std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/"; }

// max |got - want| / max(1, max |want|) over the entries where want is finite;
// infinite entries (masked scores) must be equal.
double diff(const at::Tensor& got, const at::Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  if (got.sizes() != want.sizes()) return std::numeric_limits<double>::infinity();
  const at::Tensor g = got.to(at::kFloat), finite = at::isfinite(want);
  EXPECT_TRUE(at::equal(at::isfinite(g), finite));
  EXPECT_TRUE(at::equal(g.masked_select(~finite), want.masked_select(~finite)));
  const at::Tensor w = want.masked_select(finite), x = g.masked_select(finite);
  const double scale = std::max(1.0, w.abs().max().item<double>());
  return (x - w).abs().max().item<double>() / scale;
}

struct Fixture {
  explicit Fixture(const std::string& arch)
      : arch(arch), ref(data_dir() + "attention/" + arch + "/reference.safetensors") {
    auto source = open_weights(data_dir() + ref.metadata().at("checkpoint"));
    model = load_causal_lm(*source, {}, at::TensorOptions().dtype(at::kFloat));
    const std::string root = arch == "gpt2"       ? "transformer.h."
                             : arch == "gpt_neox" ? "gpt_neox.layers."
                                                  : "model.layers.";
    for (int64_t l = 0; l < model->config().num_layers; ++l) layers.push_back(root + std::to_string(l));
    attention = ref.metadata().at("attention");
    ids = ref.load("ids");
  }
  HookPoint* point(const std::string& path) {
    for (auto& [p, m] : model->named_hookable_modules())
      if (p == path) return dynamic_cast<HookPoint*>(m);
    return nullptr;
  }
  std::string attn(int64_t l) const { return layers[static_cast<size_t>(l)] + "." + attention; }
  at::Tensor want(const std::string& name) { return ref.load(name); }
  bool has(const std::string& name) const { return ref.find(name) != nullptr; }

  std::string arch;
  SafetensorsFile ref;
  std::shared_ptr<CausalLM> model;
  std::vector<std::string> layers;
  std::string attention;
  at::Tensor ids;  // int64 [len]
};

// Sequences through the paged cache, a step at a time (the model runner's way).
class Paged {
 public:
  explicit Paged(CausalLM& model, int64_t block_size = 4, int64_t num_blocks = 48) : model_(model), bs_(block_size) {
    kv_ = allocate_kv_caches(model.num_layers(), num_blocks, block_size, model.local_kv_heads(), model.head_dim(),
                             model.options());
    for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  }
  struct Seq {
    std::vector<int32_t> tokens;
    int64_t cached = 0;
    std::vector<int32_t> blocks;
  };
  // counts[i] tokens of sequence i this step -> logits of every row [T, vocab];
  // starts[i]: the sequence's first token row.
  at::Tensor step(std::vector<Seq>& seqs, const std::vector<int64_t>& counts, std::vector<int64_t>* starts = nullptr) {
    std::vector<batching::SeqSlot> slots;
    int64_t rows = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq& s = seqs[i];
      if (starts) starts->push_back(rows);
      while (static_cast<int64_t>(s.blocks.size()) * bs_ < s.cached + counts[i]) {
        s.blocks.push_back(free_.back());
        free_.pop_back();
      }
      std::vector<int32_t> toks(s.tokens.begin() + s.cached, s.tokens.begin() + s.cached + counts[i]);
      slots.push_back(testing::seq_slot(s.cached, std::move(toks), s.blocks));
      rows += counts[i];
      s.cached += counts[i];
    }
    batching::FlatBatch batch = batching::flatten_slots(slots, bs_);
    at::Tensor hidden = model_.forward(batch.token_ids, batch.meta, kv_);
    return model_.compute_logits(hidden, at::arange(batch.meta.num_tokens, at::kLong));
  }

 private:
  CausalLM& model_;
  int64_t bs_;
  std::vector<KVCache> kv_;
  std::vector<int32_t> free_;
};

std::vector<int32_t> tokens_of(const at::Tensor& ids) {
  const int64_t* p = ids.data_ptr<int64_t>();
  return std::vector<int32_t>(p, p + ids.numel());
}

class AttentionPointsHf : public ::testing::TestWithParam<std::string> {};

// Every point of every layer with the prompt in one step.
TEST_P(AttentionPointsHf, EveryPointEqualsTransformersEager) {
  at::NoGradGuard no_grad;
  Fixture f(GetParam());
  std::map<std::string, at::Tensor> got;
  std::vector<HookHandle> hooks;
  for (int64_t l = 0; l < static_cast<int64_t>(f.layers.size()); ++l) {
    std::vector<std::pair<std::string, std::string>> names;  // (path, reference name)
    for (const char* p : kPoints) names.emplace_back(f.attn(l) + "." + p, std::string(p) + "." + std::to_string(l));
    if (f.has("resid_mid." + std::to_string(l)))
      names.emplace_back(f.layers[static_cast<size_t>(l)] + ".resid_mid", "resid_mid." + std::to_string(l));
    for (auto& [path, name] : names) {
      HookPoint* point = f.point(path);
      ASSERT_NE(point, nullptr) << f.arch << ": no point " << path;
      hooks.push_back(point->register_forward_hook(
          [&got, name = name](Module&, const ModuleIO&, const ModuleIO& out) -> std::optional<ModuleIO> {
            got[name] = out.tensor().clone();
            return std::nullopt;
          }));
    }
  }
  // Where the block has none (GPT-NeoX's parallel residual), there is no point either.
  if (!f.has("resid_mid.0")) EXPECT_EQ(f.point(f.layers[0] + ".resid_mid"), nullptr);
  Paged run(*f.model);
  std::vector<Paged::Seq> seqs(1);
  seqs[0].tokens = tokens_of(f.ids);
  at::Tensor logits = run.step(seqs, {f.ids.numel()});
  for (auto& h : hooks) h.remove();
  EXPECT_LE(diff(logits, f.want("logits")), 1e-4) << f.arch << " logits";
  size_t compared = 0;
  for (auto& [name, t] : got) {
    EXPECT_LE(diff(t, f.want(name)), kTol) << f.arch << " " << name;
    ++compared;
  }
  EXPECT_EQ(compared, f.layers.size() * (6 + (f.has("resid_mid.0") ? 1 : 0)));
}

// The prompt in chunks: each step's pattern and scores are the reference's
// rows of those queries over the keys cached so far.
TEST_P(AttentionPointsHf, ChunkedPrefillSeesEveryCachedKey) {
  at::NoGradGuard no_grad;
  Fixture f(GetParam());
  const int64_t last = static_cast<int64_t>(f.layers.size()) - 1;
  std::vector<at::Tensor> patterns, scores;
  auto keep = [](std::vector<at::Tensor>& into) {
    return [&into](Module&, const ModuleIO&, const ModuleIO& out) -> std::optional<ModuleIO> {
      into.push_back(out.tensor().clone());
      return std::nullopt;
    };
  };
  HookHandle h1 = f.point(f.attn(last) + ".pattern")->register_forward_hook(keep(patterns));
  HookHandle h2 = f.point(f.attn(last) + ".scores")->register_forward_hook(keep(scores));
  Paged run(*f.model);
  std::vector<Paged::Seq> seqs(1);
  seqs[0].tokens = tokens_of(f.ids);
  ASSERT_EQ(f.ids.numel(), 21);
  const std::vector<int64_t> chunks = {8, 7, 5, 1};  // the last one a decode-sized step
  for (int64_t c : chunks) run.step(seqs, {c});
  h1.remove();
  h2.remove();
  ASSERT_EQ(patterns.size(), chunks.size());
  const at::Tensor want_p = f.want("pattern." + std::to_string(last)),
                   want_s = f.want("scores." + std::to_string(last));
  int64_t done = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int64_t ctx = done + chunks[i];
    EXPECT_LE(diff(patterns[i], want_p.narrow(1, done, chunks[i]).narrow(2, 0, ctx)), kTol) << f.arch << " chunk " << i;
    EXPECT_LE(diff(scores[i], want_s.narrow(1, done, chunks[i]).narrow(2, 0, ctx)), kTol) << f.arch << " chunk " << i;
    done = ctx;
  }
}

// Two sequences in one batch, only the first watched (the watch query the
// interleaver installs): the pattern fires for it alone, and the other's
// logits are bitwise those of a batch without any hook (the fused kernel).
TEST_P(AttentionPointsHf, InAMixedBatchOnlyTheWatchedSequenceIsComputed) {
  at::NoGradGuard no_grad;
  Fixture f(GetParam());
  const std::vector<int32_t> other = {5, 9, 33, 71, 12, 250, 18, 40, 41, 7, 3};
  auto run_batch = [&](bool hooked, std::vector<at::Tensor>* seen, std::vector<int64_t>* starts) {
    Paged run(*f.model);
    std::vector<Paged::Seq> seqs(2);
    seqs[0].tokens = other;
    seqs[1].tokens = tokens_of(f.ids);
    std::vector<int64_t> st;
    HookPoint* p = f.point(f.attn(1) + ".pattern");
    HookHandle h;
    if (hooked) {
      // Row 11 is where the second sequence starts: the only one watched.
      p->set_watch_query([](int64_t token_start) { return token_start == 11; });
      h = p->register_forward_hook([&, p](Module&, const ModuleIO&, const ModuleIO& out) -> std::optional<ModuleIO> {
        seen->push_back(out.tensor().clone());
        starts->push_back(p->sequence_start());
        return std::nullopt;
      });
    }
    at::Tensor logits = run.step(seqs, {static_cast<int64_t>(other.size()), f.ids.numel()}, &st);
    h.remove();
    p->clear_watch_query();
    EXPECT_EQ(st[1], 11);
    return logits;
  };
  std::vector<at::Tensor> seen;
  std::vector<int64_t> starts;
  at::Tensor plain = run_batch(false, nullptr, nullptr);
  at::Tensor traced = run_batch(true, &seen, &starts);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(starts[0], 11);
  EXPECT_LE(diff(seen[0], f.want("pattern.1")), kTol) << f.arch;
  EXPECT_TRUE(at::equal(traced.narrow(0, 0, 11), plain.narrow(0, 0, 11))) << f.arch << ": the unwatched rows changed";
  EXPECT_LE(diff(traced.narrow(0, 11, f.ids.numel()), f.want("logits")), 1e-4) << f.arch;
}

// Zeroing one head's probabilities through a pattern write gives
// transformers' logits under the same ablation.
TEST_P(AttentionPointsHf, HeadAblationThroughThePatternEqualsTransformers) {
  at::NoGradGuard no_grad;
  Fixture f(GetParam());
  const int64_t layer = std::stoll(f.ref.metadata().at("ablate_layer"));
  const int64_t head = std::stoll(f.ref.metadata().at("ablate_head"));
  HookHandle h =
      f.point(f.attn(layer) + ".pattern")->register_forward_hook([head](Module&, const ModuleIO&, const ModuleIO& out) {
        at::Tensor p = out.tensor().clone();  // [heads, query, key]
        p[head].zero_();
        return std::optional<ModuleIO>(ModuleIO(p));
      });
  Paged run(*f.model);
  std::vector<Paged::Seq> seqs(1);
  seqs[0].tokens = tokens_of(f.ids);
  at::Tensor logits = run.step(seqs, {f.ids.numel()});
  h.remove();
  const at::Tensor want = f.want("ablated.logits");
  EXPECT_GT((want - f.want("logits")).abs().max().item<double>(), 1e-2) << "the ablation changes nothing";
  EXPECT_LE(diff(logits, want), 1e-4) << f.arch;
}

INSTANTIATE_TEST_SUITE_P(Architectures, AttentionPointsHf, ::testing::ValuesIn(kArchs),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace nnsight
