// GGUF files that llama.cpp's own converter (convert_hf_to_gguf.py, f16)
// made from the Hugging Face fixtures (tests/data/models-gguf/<arch>.gguf,
// see docs/weights.md) serve every tensor equal to the Hugging Face
// checkpoint's under its Hugging Face name, and the model loaded from them
// gives transformers' logits and layer outputs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "batching/flattener.h"
#include "core/kv_cache.h"
#include "core/safetensors/safetensors_file.h"
#include "core/weight_source.h"
#include "models/causal_lm.h"
#include "support/seq_slots.h"

namespace nnsight {
namespace {

std::string data(const std::string& rel) { return std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/" + rel; }

double rel_diff(const at::Tensor& got, const at::Tensor& want) {
  const double scale = std::max(want.abs().max().item<double>(), 1e-30);
  return (got - want).abs().max().item<double>() / scale;
}

class GgufFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufFixture, TensorsEqualTheHuggingFaceCheckpoint) {
  const std::string arch = GetParam();
  auto gguf = open_weights(data("models-gguf/" + arch + ".gguf"));
  auto hf = open_weights(data("models/" + arch));
  const ModelConfig& g = gguf->config();
  const ModelConfig& h = hf->config();
  EXPECT_EQ(g.architecture, h.architecture);
  EXPECT_EQ(g.num_layers, h.num_layers);
  EXPECT_EQ(g.num_kv_heads, h.num_kv_heads);
  EXPECT_EQ(g.rotary_dim, h.rotary_dim);
  // llama.cpp's converter writes Gemma 3's tied head as a tensor of its own,
  // and Llama's and Qwen2's too when the checkpoint stores it (these
  // fixtures do: save_pretrained with an explicit state dict); equal values,
  // checked below.
  if (arch != "gemma3_gguf" && arch != "llama" && arch != "qwen2") {
    EXPECT_EQ(g.tie_word_embeddings, h.tie_word_embeddings);
  }
  EXPECT_EQ(g.num_experts, h.num_experts);
  EXPECT_EQ(g.num_experts_per_token, h.num_experts_per_token);
  EXPECT_EQ(g.sliding_window, h.sliding_window);
  EXPECT_EQ(g.sliding_layers, h.sliding_layers);
  EXPECT_EQ(g.query_pre_attn_scalar, h.query_pre_attn_scalar);
  // Llama 3's scaling comes back from the divisors llama.cpp stores (rope_freqs.weight).
  if (h.rope_scaling.type == "llama3") {
    EXPECT_TRUE(g.rope_scaling.is_llama3()) << arch;
    EXPECT_EQ(g.rope_scaling.factor, h.rope_scaling.factor);
    EXPECT_EQ(g.rope_scaling.low_freq_factor, h.rope_scaling.low_freq_factor);
    EXPECT_EQ(g.rope_scaling.high_freq_factor, h.rope_scaling.high_freq_factor);
    EXPECT_EQ(g.rope_scaling.original_max_position, h.rope_scaling.original_max_position);
  } else {
    EXPECT_EQ(g.rope_scaling.type, h.rope_scaling.type);
  }
  EXPECT_EQ(g.attention_bias, h.attention_bias);
  EXPECT_EQ(g.attention_bias && g.attention_out_bias, h.attention_bias && h.attention_out_bias);
  int compared = 0;
  for (const std::string& name : hf->names()) {
    ASSERT_TRUE(gguf->has(name)) << arch << ": GGUF lacks " << name;
    EXPECT_EQ(gguf->shape(name), hf->shape(name)) << name;
    // bf16 values are exact in f16 except the few tiny enough to be f16 subnormals
    // (Gemma's norms, stored by llama.cpp as 1 + w, come back exactly too).
    const double tol = 1e-7;
    EXPECT_LE((gguf->load(name) - hf->load(name)).abs().max().item<double>(), tol) << arch << " " << name;
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

TEST_P(GgufFixture, LogitsAndLayersMatchTransformers) {
  at::NoGradGuard no_grad;
  const std::string arch = GetParam();
  SafetensorsFile ref(data("models/" + arch + "/reference.safetensors"));
  auto source = open_weights(data("models-gguf/" + arch + ".gguf"));
  auto model = load_causal_lm(*source, tp::ParallelContext{}, at::TensorOptions().dtype(at::kFloat));
  const std::string layer_prefix = arch == "gpt_neox" ? "gpt_neox.layers." : "model.layers.";
  std::vector<at::Tensor> layers(static_cast<size_t>(model->num_layers()));
  for (auto& [path, m] : model->named_hookable_modules()) {
    for (int64_t l = 0; l < model->num_layers(); ++l) {
      if (path != layer_prefix + std::to_string(l)) continue;
      m->register_forward_hook([&layers, l](Module&, const ModuleIO&, const ModuleIO& o) {
        layers[static_cast<size_t>(l)] = o.tensor().clone();
        return std::optional<ModuleIO>();
      });
    }
  }
  const double tol = 1e-4;
  for (int s = 0; s < 3; ++s) {
    const std::string ss = std::to_string(s);
    at::Tensor ids = ref.load("ids." + ss);
    const int64_t n = ids.numel();
    auto meta = batching::flatten_slots({testing::seq_slot(0, n, {2, 0, 5, 1, 4, 3})}, 4).meta;
    auto kv =
        allocate_kv_caches(model->num_layers(), 6, 4, model->local_kv_heads(), model->head_dim(), model->options());
    at::Tensor hidden = model->forward(ids, meta, kv);
    at::Tensor logits = model->compute_logits(hidden, at::arange(n, at::kLong));
    const double d = rel_diff(logits, ref.load("logits." + ss));
    EXPECT_LE(d, tol) << arch << " seq " << s;
    std::cout << "[ " << arch << ".gguf ] seq " << s << " logits relative difference to transformers: " << d << "\n";
    for (int64_t l = 0; l < model->num_layers(); ++l)
      EXPECT_LE(rel_diff(layers[static_cast<size_t>(l)], ref.load("layer." + ss + "." + std::to_string(l))), tol)
          << arch << " layer " << l << " seq " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GgufFixture,
                         ::testing::Values("llama", "qwen2", "qwen3", "olmo2", "phi3", "gpt_neox", "gemma",
                                           "gemma2_gguf", "gemma3_gguf", "mixtral", "qwen3_moe_gguf"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace nnsight
