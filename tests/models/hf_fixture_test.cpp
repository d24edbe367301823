// Every architecture against Hugging Face's own forward, on the tiny random
// checkpoints scripts/make-model-fixtures wrote into tests/data/models/<arch>/
// (transformers 4.51.3) and scripts/make-model-fixtures-v5 into
// tests/data/models-v5/<arch>/ (transformers 5.x, configs in its spelling):
// config.json + safetensors exactly as transformers saves them, and
// reference.safetensors with transformers' outputs (docs/weights.md). Test
// names say the set: .../transformers4_mistral, .../transformers5_mistral.
//
// For each: a mixed batch of three sequences through the paged KV cache
// (whole prefills, a prompt chunked over three steps, decode steps riding in
// the same batches) gives every decoder layer's output, the final norm and
// the logits of every prompt position within 1e-4 (relative to the largest
// reference value) of transformers', and greedy decoding reproduces
// transformers' greedy continuation token for token. An ablation (one
// module's output zeroed through a forward hook at its Hugging Face path)
// changes the logits as zeroing it in transformers does. At TP=2 (gloo) the
// logits equal TP=1's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <numeric>
#include <random>

#include <nnsight/error.hpp>

#include "batching/flattener.h"
#include "core/hf/hf_config.h"
#include "core/kv_cache.h"
#include "core/safetensors/safetensors_file.h"
#include "core/weight_source.h"
#include "models/causal_lm.h"
#include "support/bitwise_equal.h"
#include "support/hf_fixtures.h"
#include "support/seq_slots.h"
#include "support/thread_ranks.h"

namespace nnsight {
namespace {

using testing::hf_fixture_dir;
using testing::HfFixtureCase;

// "transformers5 mistral", for messages.
std::string label(const HfFixtureCase& f) {
  return "transformers" + std::to_string(f.transformers_major) + " " + f.arch;
}

// max |got - want| / max |want|
double rel_diff(const at::Tensor& got, const at::Tensor& want) {
  const double scale = std::max(want.abs().max().item<double>(), 1e-30);
  return (got.to(at::kFloat) - want).abs().max().item<double>() / scale;
}

Module* find_module(CausalLM& model, const std::string& path) {
  for (auto& [p, m] : model.named_hookable_modules())
    if (p == path) return m;
  return nullptr;
}

struct Reference {
  explicit Reference(const HfFixtureCase& f) : file(hf_fixture_dir(f) + "/reference.safetensors") {}
  at::Tensor get(const std::string& name) const { return file.load(name); }
  std::string meta(const std::string& key) const {
    auto it = file.metadata().find(key);
    return it == file.metadata().end() ? "" : it->second;
  }
  SafetensorsFile file;
};

// Drives a model through the paged cache the way the model runner does:
// per step, each sequence computes some of its not-yet-cached tokens.
class PagedRun {
 public:
  PagedRun(CausalLM& model, int64_t block_size = 4, int64_t num_blocks = 64) : model_(model), bs_(block_size) {
    kv_ = allocate_kv_caches(model.num_layers(), num_blocks, block_size, model.local_kv_heads(), model.head_dim(),
                             model.options());
    free_.resize(static_cast<size_t>(num_blocks));
    std::iota(free_.begin(), free_.end(), 0);
    std::mt19937_64 rng(5);
    std::shuffle(free_.begin(), free_.end(), rng);  // non-contiguous block tables
  }
  struct Seq {
    std::vector<int64_t> tokens;
    int64_t cached = 0;
    std::vector<int32_t> blocks;
  };
  struct Step {
    at::Tensor hidden;               // [T, hidden] after the final norm
    at::Tensor logits;               // [T, vocab]: every row
    std::vector<at::Tensor> layers;  // per decoder layer: [T, hidden]
    std::vector<int64_t> row_start;  // per sequence (-1 when not scheduled)
  };
  // counts[i]: tokens of sequence i computed this step.
  Step step(std::vector<Seq>& seqs, const std::vector<int64_t>& counts, const std::vector<Module*>& layers) {
    std::vector<batching::SeqSlot> slots;
    std::vector<int64_t> ids;
    Step out;
    for (size_t i = 0; i < seqs.size(); ++i) {
      out.row_start.push_back(counts[i] ? static_cast<int64_t>(ids.size()) : -1);
      if (counts[i] == 0) continue;
      Seq& s = seqs[i];
      const int64_t need = s.cached + counts[i];
      EXPECT_LE(need, static_cast<int64_t>(s.tokens.size()));
      while (static_cast<int64_t>(s.blocks.size()) * bs_ < need) {
        s.blocks.push_back(free_.back());
        free_.pop_back();
      }
      std::vector<int32_t> new_tokens;
      for (int64_t p = s.cached; p < need; ++p) {
        ids.push_back(s.tokens[static_cast<size_t>(p)]);
        new_tokens.push_back(static_cast<int32_t>(s.tokens[static_cast<size_t>(p)]));
      }
      slots.push_back(testing::seq_slot(s.cached, std::move(new_tokens), s.blocks));
    }
    out.layers.resize(layers.size());
    std::vector<HookHandle> handles;
    for (size_t l = 0; l < layers.size(); ++l) {
      handles.push_back(layers[l]->register_forward_hook([&out, l](Module&, const ModuleIO&, const ModuleIO& o) {
        out.layers[l] = o.tensor().clone();
        return std::optional<ModuleIO>();
      }));
    }
    batching::FlatBatch batch = batching::flatten_slots(slots, bs_);
    const batching::BatchMeta& meta = batch.meta;
    out.hidden = model_.forward(batch.token_ids, meta, kv_);
    out.logits = model_.compute_logits(out.hidden, at::arange(meta.num_tokens, at::kLong));
    for (auto& h : handles) h.remove();
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i].cached += counts[i];
    return out;
  }

 private:
  CausalLM& model_;
  int64_t bs_;
  std::vector<KVCache> kv_;
  std::vector<int32_t> free_;
};

// The decoder stack as transformers names it: model, gpt_neox, or a
// multimodal model's model.language_model.
std::string stack_path(const ModelConfig& cfg) {
  return cfg.architecture == "gpt_neox" ? "gpt_neox" : cfg.multimodal.empty() ? "model" : "model.language_model";
}
std::string layer_path(const ModelConfig& cfg, int64_t l) { return stack_path(cfg) + ".layers." + std::to_string(l); }
std::string norm_path(const ModelConfig& cfg) {
  return cfg.architecture == "gpt_neox" ? "gpt_neox.final_layer_norm" : stack_path(cfg) + ".norm";
}

std::shared_ptr<CausalLM> load(const HfFixtureCase& f, const tp::ParallelContext& ctx = {}) {
  auto source = open_weights(hf_fixture_dir(f));
  return load_causal_lm(*source, ctx, at::TensorOptions().dtype(at::kFloat));
}

class HfFixture : public ::testing::TestWithParam<HfFixtureCase> {};

// One sequence's whole prompt in one step: the logits of every position.
at::Tensor prefill_logits(CausalLM& model, const at::Tensor& ids) {
  PagedRun run(model);
  std::vector<PagedRun::Seq> seqs(1);
  seqs[0].tokens.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  return run.step(seqs, {ids.numel()}, {}).logits;  // [len, vocab]
}

TEST_P(HfFixture, MixedPagedBatchMatchesTransformers) {
  at::NoGradGuard no_grad;
  const HfFixtureCase& fixture = GetParam();
  const std::string arch = label(fixture);
  Reference ref(fixture);
  auto model = load(fixture);
  const ModelConfig& cfg = model->config();
  std::vector<Module*> layers;
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    layers.push_back(find_module(*model, layer_path(cfg, l)));
    ASSERT_NE(layers.back(), nullptr) << layer_path(cfg, l);
  }
  Module* norm = find_module(*model, norm_path(cfg));
  ASSERT_NE(norm, nullptr);
  layers.push_back(norm);  // the final norm's output is captured like a layer's

  std::vector<PagedRun::Seq> seqs(3);
  std::vector<std::vector<int64_t>> greedy(3);
  std::vector<int64_t> prompt_len(3);
  for (int s = 0; s < 3; ++s) {
    at::Tensor ids = ref.get("ids." + std::to_string(s));
    seqs[s].tokens.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
    prompt_len[s] = ids.numel();
    at::Tensor g = ref.get("greedy." + std::to_string(s));
    greedy[s].assign(g.data_ptr<int64_t>(), g.data_ptr<int64_t>() + g.numel());
  }
  ASSERT_EQ(prompt_len[2], 21);  // the plan below chunks sequence 2 as 8 + 7 + 6
  const size_t want_new = greedy[0].size();
  PagedRun run(*model);
  std::vector<std::vector<int64_t>> got(3);
  double worst = 0;
  int64_t compared_rows = 0;
  for (int st = 0; st < 20; ++st) {
    std::vector<int64_t> counts(3, 0);
    bool any = false;
    for (int s = 0; s < 3; ++s) {
      const int64_t left = static_cast<int64_t>(seqs[s].tokens.size()) - seqs[s].cached;
      if (s == 2 && seqs[s].cached < prompt_len[s]) {
        counts[s] = std::min<int64_t>(st == 0 ? 8 : 7, left);  // chunked prefill
      } else if (got[s].size() < want_new || left > 0) {
        counts[s] = left;  // whole prompt, or the token decoded last step
      }
      any = any || counts[s] > 0;
    }
    if (!any) break;
    auto out = run.step(seqs, counts, layers);
    for (int s = 0; s < 3; ++s) {
      if (counts[s] == 0) continue;
      const int64_t first = seqs[s].cached - counts[s], row = out.row_start[s];
      // Prompt positions: compare with the reference rows.
      const int64_t n_prompt = std::max<int64_t>(0, std::min(prompt_len[s], seqs[s].cached) - first);
      if (n_prompt > 0) {
        const std::string ss = std::to_string(s);
        for (int64_t l = 0; l < cfg.num_layers; ++l) {
          const double d = rel_diff(out.layers[l].narrow(0, row, n_prompt),
                                    ref.get("layer." + ss + "." + std::to_string(l)).narrow(0, first, n_prompt));
          EXPECT_LE(d, 1e-4) << arch << " layer " << l << " seq " << s << " step " << st;
          worst = std::max(worst, d);
        }
        const double dn =
            rel_diff(out.layers.back().narrow(0, row, n_prompt), ref.get("norm." + ss).narrow(0, first, n_prompt));
        const double dl =
            rel_diff(out.logits.narrow(0, row, n_prompt), ref.get("logits." + ss).narrow(0, first, n_prompt));
        EXPECT_LE(dn, 1e-4) << arch << " final norm seq " << s << " step " << st;
        EXPECT_LE(dl, 1e-4) << arch << " logits seq " << s << " step " << st;
        worst = std::max({worst, dn, dl});
        compared_rows += n_prompt;
      }
      // Greedy: once the prompt is in, the last row's argmax is the next token.
      if (seqs[s].cached >= prompt_len[s] && got[s].size() < want_new) {
        const int64_t next = out.logits[row + counts[s] - 1].argmax().item<int64_t>();
        got[s].push_back(next);
        seqs[s].tokens.push_back(next);
      }
    }
  }
  EXPECT_EQ(compared_rows, prompt_len[0] + prompt_len[1] + prompt_len[2]);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(got[s], greedy[s]) << arch << " greedy continuation of sequence " << s;
  RecordProperty("worst_relative_diff", std::to_string(worst));
  std::cout << "[ " << arch << " ] worst relative difference to transformers: " << worst << "\n";
}

TEST_P(HfFixture, AblationAtHuggingFacePathMatchesTransformers) {
  at::NoGradGuard no_grad;
  const HfFixtureCase& fixture = GetParam();
  const std::string arch = label(fixture);
  Reference ref(fixture);
  auto model = load(fixture);
  at::Tensor ids = ref.get("ids.0");
  auto prefill = [&] { return prefill_logits(*model, ids); };
  // Router logits (MoE): the gate's output as a hook sees it, on the unablated model.
  const std::string router_path = ref.meta("router");
  if (!router_path.empty()) {
    Module* gate = find_module(*model, router_path);
    ASSERT_NE(gate, nullptr) << router_path;
    at::Tensor router;
    HookHandle h = gate->register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO& o) {
      router = o.tensor().clone();
      return std::optional<ModuleIO>();
    });
    prefill();
    h.remove();
    ASSERT_TRUE(router.defined());
    EXPECT_LE(rel_diff(router, ref.get("router.0")), 1e-4) << arch << " router logits at " << router_path;
  }
  const std::string path = ref.meta("ablate");
  ASSERT_FALSE(path.empty());
  Module* m = find_module(*model, path);
  ASSERT_NE(m, nullptr) << arch << ": no module at the Hugging Face path " << path;
  m->register_forward_hook([](Module&, const ModuleIO&, const ModuleIO& o) -> std::optional<ModuleIO> {
    if (!o.is_tuple()) return ModuleIO(at::zeros_like(o.tensor()));
    std::vector<at::Tensor> items = o.items();
    items[0] = at::zeros_like(items[0]);
    return ModuleIO::tuple(items);
  });
  const at::Tensor want = ref.get("ablation.logits");
  EXPECT_LE(rel_diff(prefill(), want), 1e-4) << arch << " with " << path << " zeroed";
  // Not vacuous: the ablation changes the logits.
  EXPECT_GT(rel_diff(ref.get("logits.0"), want), 1e-2) << arch;
}

// Hooks that only read change no bit: the paths that skip work when nothing
// watches (the SiLU-gated product in one pass, q and k rotated in place
// without a copy, whichever module produced them, the residual add fused
// into post_attention_layernorm) compute what the hooked paths do.
TEST_P(HfFixture, ReadOnlyHooksChangeNoBit) {
  at::NoGradGuard no_grad;
  const HfFixtureCase& fixture = GetParam();
  const std::string arch = label(fixture);
  const at::Tensor ids = Reference(fixture).get("ids.0");
  auto model = load(fixture);
  const at::Tensor plain = prefill_logits(*model, ids);
  std::vector<HookHandle> handles;
  int64_t seen = 0;
  for (auto& [path, m] : model->named_hookable_modules()) {
    // Activations and the projections that feed the rotary (Phi-3's and
    // GPT-NeoX's fused ones included), as each architecture names them.
    bool watched = false;
    for (const std::string suffix : {".act_fn", ".act", ".activation_fn", ".q_proj", ".k_proj", ".qkv_proj",
                                     ".query_key_value", ".q_norm", ".k_norm", ".post_attention_layernorm"})
      watched = watched ||
                (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0);
    if (!watched) continue;
    handles.push_back(m->register_forward_hook([&seen](Module&, const ModuleIO&, const ModuleIO& o) {
      seen += o.is_tuple() ? 0 : o.tensor().numel();
      return std::optional<ModuleIO>();
    }));
  }
  const at::Tensor hooked = prefill_logits(*model, ids);
  for (auto& h : handles) h.remove();
  EXPECT_GT(seen, 0) << arch << ": no activation or q / k projection was hooked";
  EXPECT_TRUE(nnsight::testing::bitwise_equal(plain, hooked))
      << arch << ": read-only hooks changed the logits by " << (plain - hooked).abs().max().item<double>();
}

TEST_P(HfFixture, TensorParallelTwoRanksEqualsOne) {
  at::NoGradGuard no_grad;
  const HfFixtureCase& fixture = GetParam();
  const std::string arch = label(fixture);
  Reference ref(fixture);
  at::Tensor ids = ref.get("ids.2");
  auto run_logits = [&](CausalLM& model) {
    PagedRun run(model);
    std::vector<PagedRun::Seq> seqs(1);
    seqs[0].tokens.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
    auto a = run.step(seqs, {12}, {});  // a chunk, then the rest
    auto b = run.step(seqs, {ids.numel() - 12}, {});
    return at::cat({a.logits, b.logits});
  };
  auto single = load(fixture);
  const at::Tensor want = run_logits(*single);
  std::vector<at::Tensor> got(2);
  testing::run_ranks(2, [&](tp::ParallelContext& ctx) {
    at::NoGradGuard ng;
    auto model = load(fixture, ctx);
    got[ctx.rank()] = run_logits(*model);
  });
  for (int r = 0; r < 2; ++r) EXPECT_LE(rel_diff(got[r], want), 1e-4) << arch << " rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Models, HfFixture,
                         ::testing::ValuesIn(testing::hf_fixtures(
                             {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gpt_neox", "olmo2", "phi3",
                              "gemma3_text", "mixtral", "qwen3_moe", "gemma2_gguf", "gemma3_gguf", "qwen3_moe_gguf"},
                             {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gpt_neox", "olmo2", "phi3",
                              "gemma3_text", "mixtral", "qwen3_moe", "gemma3", "olmo3", "smollm3"})),
                         testing::hf_fixture_name);

// Mistral, Qwen2 and SmolLM3 run Llama's computation, OLMo 3 OLMo 2's;
// their modules carry the class names transformers gives them (what an
// NNsight user prints and filters by), from config.json and, for Qwen2,
// from its GGUF file too.
TEST(HfFixtureTypeNames, ModulesOfSharedArchitecturesAreNamedAsInTransformers) {
  for (const int v : {4, 5}) {
    for (const std::string prefix : {"Llama", "Mistral", "Qwen2", "SmolLM3", "Olmo3"}) {
      std::string arch = prefix;
      std::transform(arch.begin(), arch.end(), arch.begin(), [](char c) { return std::tolower(c); });
      if (v == 4 && (arch == "smollm3" || arch == "olmo3")) continue;  // newer than transformers 4.51
      auto model = load(HfFixtureCase{v, arch});
      EXPECT_EQ(model->type_name(), prefix + "ForCausalLM");
      const std::vector<std::pair<std::string, std::string>> want = {
          {"model", "Model"},
          {"model.layers.1", "DecoderLayer"},
          {"model.layers.1.self_attn", "Attention"},
          {"model.layers.1.mlp", "MLP"},
          {"model.layers.1.post_attention_layernorm", "RMSNorm"},
          {"model.norm", "RMSNorm"}};
      for (const auto& [path, type] : want) {
        Module* m = find_module(*model, path);
        ASSERT_NE(m, nullptr) << path;
        EXPECT_EQ(m->type_name(), prefix + type) << arch << " " << path;
      }
      // Qwen2's o_proj has no bias, its q/k/v projections do.
      const auto params = model->named_parameters();
      EXPECT_EQ(params.contains("model.layers.0.self_attn.q_proj.bias"), arch == "qwen2") << arch;
      EXPECT_FALSE(params.contains("model.layers.0.self_attn.o_proj.bias")) << arch;
    }
  }
  auto gguf = open_weights(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/models-gguf/qwen2.gguf");
  auto q = load_causal_lm(*gguf, {}, at::TensorOptions().dtype(at::kFloat));
  EXPECT_EQ(q->type_name(), "Qwen2ForCausalLM");
}

// OLMo 2/3's k_norm spans the whole key projection: more ranks than KV
// heads (which would replicate a head) is a ConfigError naming the limit,
// not a shape failure inside the forward.
TEST(HfFixtureTensorParallel, WholeProjectionKNormRefusesMoreRanksThanKvHeads) {
  std::vector<std::string> errors(4);
  testing::run_ranks(4, [&](tp::ParallelContext& ctx) {
    try {
      load(HfFixtureCase{5, "olmo3"}, ctx);  // 2 KV heads
    } catch (const ConfigError& e) {
      errors[static_cast<size_t>(ctx.rank())] = e.what();
    }
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("tensor-parallel size (4) exceeds the number of key/value heads (2)"), std::string::npos) << e;
    EXPECT_NE(e.find("Olmo3Attention"), std::string::npos) << e;
  }
}

// A multimodal Gemma 3 checkpoint (Gemma3ForConditionalGeneration) is
// served as transformers builds it, without the image side: the module
// types and paths an NNsight user sees in transformers 5.x, and no vision
// tower or projector to hook.
TEST(HfFixtureGemma3Multimodal, ModuleTreeIsTransformersLanguageModel) {
  auto model = load(HfFixtureCase{5, "gemma3"});
  EXPECT_EQ(model->type_name(), "Gemma3ForConditionalGeneration");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"model", "Gemma3Model"},
      {"model.language_model", "Gemma3TextModel"},
      {"model.language_model.embed_tokens", "Gemma3TextScaledWordEmbedding"},
      {"model.language_model.layers.1", "Gemma3DecoderLayer"},
      {"model.language_model.layers.1.self_attn.q_norm", "Gemma3RMSNorm"},
      {"model.language_model.norm", "Gemma3RMSNorm"}};
  for (const auto& [path, type] : want) {
    Module* m = find_module(*model, path);
    ASSERT_NE(m, nullptr) << path;
    EXPECT_EQ(m->type_name(), type) << path;
  }
  for (const char* absent :
       {"model.layers.0", "model.vision_tower", "model.multi_modal_projector", "language_model.model.layers.0"})
    EXPECT_EQ(find_module(*model, absent), nullptr) << absent;
}

// In transformers' order: Gemma3Model embeds the tokens, then calls its
// language model on the embeddings; the stack's layers and norm follow.
TEST(HfFixtureGemma3Multimodal, HooksFireInTransformersOrderWithTheirValues) {
  at::NoGradGuard no_grad;
  auto model = load(HfFixtureCase{5, "gemma3"});
  std::vector<std::string> order;
  at::Tensor embed_out, lm_in, base_in, lm_out, base_out;
  const auto pre = [&](const char* path, at::Tensor* in) {
    find_module(*model, path)->register_forward_pre_hook([&order, path, in](Module&, const ModuleIO& i) {
      order.push_back(std::string(path) + ".input");
      *in = i.at(0).clone();
      return std::optional<ModuleIO>();
    });
  };
  const auto post = [&](const char* path, at::Tensor* out) {
    find_module(*model, path)->register_forward_hook([&order, path, out](Module&, const ModuleIO&, const ModuleIO& o) {
      order.push_back(std::string(path) + ".output");
      *out = o.tensor().clone();
      return std::optional<ModuleIO>();
    });
  };
  pre("model", &base_in);
  post("model.language_model.embed_tokens", &embed_out);
  pre("model.language_model", &lm_in);
  post("model.language_model", &lm_out);
  post("model", &base_out);
  Reference ref(HfFixtureCase{5, "gemma3"});
  at::Tensor ids = ref.get("ids.1");
  PagedRun run(*model);
  std::vector<PagedRun::Seq> seqs(1);
  seqs[0].tokens.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  run.step(seqs, {ids.numel()}, {});
  EXPECT_EQ(order,
            (std::vector<std::string>{"model.input", "model.language_model.embed_tokens.output",
                                      "model.language_model.input", "model.language_model.output", "model.output"}));
  ASSERT_TRUE(base_in.defined() && lm_in.defined() && lm_out.defined() && base_out.defined());
  EXPECT_EQ(base_in.numel(), ids.numel()) << "the base takes the token ids";
  EXPECT_TRUE(at::equal(lm_in, embed_out)) << "the language model takes the (scaled) embeddings";
  EXPECT_TRUE(at::equal(lm_out, base_out));
  EXPECT_LE(rel_diff(lm_out, ref.get("norm.1")), 1e-5) << "its output is the final norm's";
}

// transformers' Gemma 3 scales the embedding inside `embed_tokens`
// (Gemma3TextScaledWordEmbedding), Gemma 1/2 after it: a hook on
// model.embed_tokens sees what that module returns there.
TEST(HfFixtureGemma, EmbedTokensOutputIsWhatTheModuleReturnsInTransformers) {
  at::NoGradGuard no_grad;
  for (const HfFixtureCase& fixture :
       testing::hf_fixtures({"gemma", "gemma2", "gemma3_text"}, {"gemma", "gemma2", "gemma3_text"})) {
    const std::string& arch = fixture.arch;
    SCOPED_TRACE(label(fixture));
    Reference ref(fixture);
    auto model = load(fixture);
    at::Tensor embed_out, layer_in;
    Module* embed = find_module(*model, "model.embed_tokens");
    Module* layer0 = find_module(*model, "model.layers.0");
    ASSERT_TRUE(embed && layer0);
    EXPECT_EQ(embed->type_name(), arch == "gemma3_text" ? "Gemma3TextScaledWordEmbedding" : "Embedding");
    embed->register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO& o) {
      embed_out = o.tensor().clone();
      return std::optional<ModuleIO>();
    });
    layer0->register_forward_pre_hook([&](Module&, const ModuleIO& in) {
      layer_in = in.at(0).clone();
      return std::optional<ModuleIO>();
    });
    at::Tensor ids = ref.get("ids.1");
    PagedRun run(*model);
    std::vector<PagedRun::Seq> seqs(1);
    seqs[0].tokens.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
    run.step(seqs, {ids.numel()}, {});
    ASSERT_TRUE(embed_out.defined() && layer_in.defined());
    const double scale = arch == "gemma3_text" ? 1.0 : 8.0;  // sqrt(hidden 64) outside the module
    EXPECT_TRUE(at::equal(embed_out * scale, layer_in));
  }
}

TEST(HfConfig, UnimplementedFieldIsAnErrorNamingIt) {
  const std::string base = R"({"model_type": "llama", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
      "num_hidden_layers": 1, "num_attention_heads": 2)";
  EXPECT_NO_THROW(parse_hf_config(base + "}", "c.json"));
  try {
    parse_hf_config(base + R"(, "sliding_window": 8})", "c.json");
    FAIL() << "a llama config with a sliding window must not load";
  } catch (const LoadError& e) {
    EXPECT_NE(
        std::string(e.what()).find("c.json: field 'sliding_window' = 8 is not implemented for model_type 'llama'"),
        std::string::npos)
        << e.what();
  }
  // A null field is the default, not a feature.
  EXPECT_NO_THROW(parse_hf_config(base + R"(, "sliding_window": null})", "c.json"));
  try {
    parse_hf_config(R"({"model_type": "qwen3", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
      "num_hidden_layers": 1, "num_attention_heads": 2, "use_sliding_window": true, "sliding_window": 4})",
                    "q.json");
    FAIL();
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("use_sliding_window"), std::string::npos) << e.what();
  }
}

// Configs as published checkpoints spell them (bookkeeping fields included) load.
TEST(HfConfig, PublishedStyleConfigsLoad) {
  const ModelConfig phi3 = parse_hf_config(R"({"architectures": ["Phi3ForCausalLM"], "auto_map": {"AutoConfig":
      "configuration_phi3.Phi3Config"}, "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1,
      "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
      "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
      "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
      "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
      "sliding_window": 2047, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "transformers_version": "4.40.2", "use_cache": true, "attention_bias": false, "vocab_size": 32064,
      "_attn_implementation_autoset": true})",
                                           "phi3.json");
  EXPECT_EQ(phi3.sliding_window, 2047);
  EXPECT_TRUE(phi3.layer_slides(31));
  const ModelConfig qwen = parse_hf_config(R"({"model_type": "qwen2", "vocab_size": 64, "hidden_size": 16,
      "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "use_mrope": false,
      "use_sliding_window": false, "sliding_window": 32768, "max_window_layers": 21})",
                                           "q.json");
  EXPECT_EQ(qwen.sliding_window, 0);  // use_sliding_window false: no window
  EXPECT_THROW(parse_hf_config(R"({"model_type": "qwen2", "vocab_size": 64, "hidden_size": 16,
      "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "use_mrope": true})",
                               "q.json"),
               LoadError);
  EXPECT_THROW(parse_hf_config(R"({"model_type": "gemma3_text", "vocab_size": 64, "hidden_size": 16,
      "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "attn_logit_softcapping": 50})",
                               "g.json"),
               LoadError);
}

TEST(HfConfig, UnsupportedModelTypeListsTheSupportedOnes) {
  try {
    parse_hf_config(R"({"model_type": "falcon"})", "f.json");
    FAIL();
  } catch (const LoadError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("model_type 'falcon' is not supported"), std::string::npos) << m;
    for (const char* t : {"gemma2", "gemma3_text", "qwen3", "gpt_neox", "olmo2", "olmo3", "phi3", "mixtral", "mistral"})
      EXPECT_NE(m.find(t), std::string::npos) << t;
  }
}

TEST(HfConfig, MistralWindowAndGemmaLayerPatternsAreRead) {
  const ModelConfig mistral = parse_hf_config(
      R"({"model_type": "mistral", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32,
          "num_hidden_layers": 2, "num_attention_heads": 2, "sliding_window": 8})",
      "m.json");
  EXPECT_EQ(mistral.sliding_window, 8);
  EXPECT_TRUE(mistral.layer_slides(0) && mistral.layer_slides(1));
  const ModelConfig g2 = read_hf_config(hf_fixture_dir({4, "gemma2"}) + "/config.json");
  EXPECT_TRUE(g2.layer_slides(0));
  EXPECT_FALSE(g2.layer_slides(1));
  EXPECT_EQ(g2.attn_logit_softcap, 3.0);
  EXPECT_EQ(g2.final_logit_softcap, 4.0);
  const ModelConfig g3 = read_hf_config(hf_fixture_dir({4, "gemma3_text"}) + "/config.json");
  EXPECT_TRUE(g3.layer_slides(0));
  EXPECT_FALSE(g3.layer_slides(1));
  EXPECT_EQ(g3.rope_theta, 100000.0);
  EXPECT_EQ(g3.rope_local_theta, 10000.0);
  EXPECT_EQ(g3.rope_scaling.type, "linear");
  // transformers 5.x: the same from layer_types and per-layer-type rope_parameters; the
  // v5 fixture's pattern (first layer global, second local) has no 4.x spelling.
  const ModelConfig g2v5 = read_hf_config(hf_fixture_dir({5, "gemma2"}) + "/config.json");
  EXPECT_TRUE(g2v5.layer_slides(0));
  EXPECT_FALSE(g2v5.layer_slides(1));
  const ModelConfig g3v5 = read_hf_config(hf_fixture_dir({5, "gemma3_text"}) + "/config.json");
  EXPECT_FALSE(g3v5.layer_slides(0));
  EXPECT_TRUE(g3v5.layer_slides(1));
  EXPECT_EQ(g3v5.sliding_window, 6);
  EXPECT_EQ(g3v5.rope_theta, 100000.0);
  EXPECT_EQ(g3v5.rope_local_theta, 10000.0);
  EXPECT_EQ(g3v5.rope_scaling.type, "linear");
  EXPECT_EQ(g3v5.rope_scaling.factor, 2.0);
}

}  // namespace
}  // namespace nnsight
