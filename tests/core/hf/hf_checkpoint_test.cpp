// HfCheckpoint: tiny llama and gpt2 checkpoints written by the test
// (config.json + safetensors, single file or sharded) served under Hugging
// Face names as float32, with GPT-2's Conv1D weights transposed to
// [out, in] and a tied lm_head served from the embedding.
#include "core/hf/hf_checkpoint.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>

#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_writer.h"
#include "support/expect_load_error.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using testing::expect_load_error;
using testing::ScratchDir;
using Named = std::vector<std::pair<std::string, at::Tensor>>;

const char* kLlamaConfig = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "_name_or_path": "tiny",
  "vocab_size": 12, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false,
  "bos_token_id": 1, "eos_token_id": [2, 3], "hidden_act": "silu", "torch_dtype": "bfloat16"})";

Named tiny_llama_tensors() {
  at::manual_seed(4);
  Named t;
  t.emplace_back("model.embed_tokens.weight", at::randn({12, 32}).to(at::kBFloat16));
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.emplace_back(p + "input_layernorm.weight", at::randn({32}));
    t.emplace_back(p + "self_attn.q_proj.weight", at::randn({32, 32}).to(at::kHalf));
    t.emplace_back(p + "self_attn.k_proj.weight", at::randn({16, 32}));
    t.emplace_back(p + "self_attn.v_proj.weight", at::randn({16, 32}));
    t.emplace_back(p + "self_attn.o_proj.weight", at::randn({32, 32}));
    t.emplace_back(p + "post_attention_layernorm.weight", at::randn({32}));
    t.emplace_back(p + "mlp.gate_proj.weight", at::randn({48, 32}).to(at::kBFloat16));
    t.emplace_back(p + "mlp.up_proj.weight", at::randn({48, 32}));
    t.emplace_back(p + "mlp.down_proj.weight", at::randn({32, 48}));
  }
  t.emplace_back("model.norm.weight", at::randn({32}));
  t.emplace_back("lm_head.weight", at::randn({12, 32}, at::kDouble));
  return t;
}

void expect_serves(const WeightSource& src, const Named& tensors) {
  ASSERT_EQ(src.names().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(src.has(name));
    EXPECT_EQ(src.shape(name), t.sizes().vec());
    at::Tensor got = src.load(name);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(got, t.to(at::kFloat)));
  }
}

TEST(HfCheckpoint, TinyLlamaDirectory) {
  ScratchDir dir;
  testing::write_file(dir.file("config.json"), std::string(kLlamaConfig));
  Named tensors = tiny_llama_tensors();
  write_safetensors(dir.file("model.safetensors"), tensors);
  HfCheckpoint ck(dir.path());
  const ModelConfig& c = ck.config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.vocab_size, 12);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.max_position, 128);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);  // first of the list
  EXPECT_FALSE(c.tie_word_embeddings);
  expect_serves(ck, tensors);
  // q/k are not permuted in Hugging Face checkpoints: slices are plain slices.
  at::Tensor q = tensors[2].second.to(at::kFloat);
  EXPECT_TRUE(at::equal(ck.load("model.layers.0.self_attn.q_proj.weight", ShardSlice::rows(5, 9)), q.narrow(0, 5, 9)));
  EXPECT_TRUE(
      at::equal(ck.load("model.layers.0.self_attn.q_proj.weight", ShardSlice::cols(8, 16)), q.narrow(1, 8, 16)));
  EXPECT_FALSE(ck.tokenizer_json_path().has_value());
  testing::write_file(dir.file("tokenizer.json"), std::string("{}"));
  EXPECT_EQ(ck.tokenizer_json_path().value(), dir.file("tokenizer.json"));
  expect_load_error([&] { ck.load("model.layers.0.mlp.up_proj.weight", ShardSlice::rows(40, 9)); },
                    {"model.layers.0.mlp.up_proj.weight", "out of range"});
  expect_load_error([&] { ck.load("model.layers.7.mlp.up_proj.weight"); }, {dir.path(), "no tensor"});
}

TEST(HfCheckpoint, ShardedCheckpointWithIndex) {
  ScratchDir dir;
  testing::write_file(dir.file("config.json"), std::string(kLlamaConfig));
  Named tensors = tiny_llama_tensors();
  Named first(tensors.begin(), tensors.begin() + 9), second(tensors.begin() + 9, tensors.end());
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), first);
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), second);
  std::string map;
  for (const auto& [n, t] : first)
    map += (map.empty() ? "" : ",") + ("\"" + n + "\": \"model-00001-of-00002.safetensors\"");
  for (const auto& [n, t] : second) map += ",\"" + n + "\": \"model-00002-of-00002.safetensors\"";
  testing::write_file(dir.file("model.safetensors.index.json"),
                      "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {" + map + "}}");
  HfCheckpoint ck(dir.path());
  expect_serves(ck, tensors);
  // open_weights on the directory finds the same checkpoint.
  std::unique_ptr<WeightSource> src = open_weights(dir.path() + "/");
  EXPECT_EQ(src->names().size(), tensors.size());

  // An index naming a tensor its shard lacks, or a shard outside the directory.
  testing::write_file(dir.file("model.safetensors.index.json"),
                      R"({"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors"}})");
  expect_load_error([&] { HfCheckpoint c(dir.path()); },
                    {"model.safetensors.index.json", "tensor 'model.norm.weight'", "does not contain it"});
  testing::write_file(dir.file("model.safetensors.index.json"),
                      R"({"weight_map": {"model.norm.weight": "../etc/passwd"}})");
  expect_load_error([&] { HfCheckpoint c(dir.path()); }, {"shard '../etc/passwd'"});
  testing::write_file(dir.file("model.safetensors.index.json"), R"({"weight_map": [1]})");
  expect_load_error([&] { HfCheckpoint c(dir.path()); }, {"no 'weight_map' object"});
  testing::write_file(dir.file("model.safetensors.index.json"),
                      R"({"weight_map": {"model.norm.weight": "missing.safetensors"}})");
  expect_load_error([&] { HfCheckpoint c(dir.path()); }, {"missing.safetensors", "cannot open"});
}

TEST(HfCheckpoint, Gpt2WithoutPrefixConv1DTransposedAndTiedHead) {
  ScratchDir dir;
  testing::write_file(dir.file("config.json"), std::string(R"({
    "model_type": "gpt2", "vocab_size": 9, "n_embd": 16, "n_layer": 1, "n_head": 2,
    "n_positions": 8, "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new",
    "bos_token_id": 8, "eos_token_id": 8})"));
  at::manual_seed(8);
  const int64_t h = 16;
  // Stored as GPT2Model saves them: no "transformer." prefix, Conv1D weights [in, out].
  Named stored = {
      {"wte.weight", at::randn({9, h})},
      {"wpe.weight", at::randn({8, h})},
      {"h.0.ln_1.weight", at::randn({h})},
      {"h.0.ln_1.bias", at::randn({h})},
      {"h.0.attn.bias", at::ones({1, 1, 8, 8})},  // causal-mask buffer, not a parameter
      {"h.0.attn.c_attn.weight", at::randn({h, 3 * h})},
      {"h.0.attn.c_attn.bias", at::randn({3 * h})},
      {"h.0.attn.c_proj.weight", at::randn({h, h})},
      {"h.0.attn.c_proj.bias", at::randn({h})},
      {"h.0.ln_2.weight", at::randn({h})},
      {"h.0.ln_2.bias", at::randn({h})},
      {"h.0.mlp.c_fc.weight", at::randn({h, 4 * h})},
      {"h.0.mlp.c_fc.bias", at::randn({4 * h})},
      {"h.0.mlp.c_proj.weight", at::randn({4 * h, h})},
      {"h.0.mlp.c_proj.bias", at::randn({h})},
      {"ln_f.weight", at::randn({h})},
      {"ln_f.bias", at::randn({h})},
  };
  write_safetensors(dir.file("model.safetensors"), stored);
  HfCheckpoint ck(dir.file("model.safetensors"));  // the single-file form
  const ModelConfig& c = ck.config();
  EXPECT_EQ(c.architecture, "gpt2");
  EXPECT_EQ(c.hidden_size, 16);
  EXPECT_EQ(c.intermediate_size, 64);  // n_inner absent: 4 * n_embd
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.max_position, 8);
  EXPECT_TRUE(c.tie_word_embeddings);  // GPT-2's default
  EXPECT_EQ(c.eos_token_id, 8);
  EXPECT_FALSE(ck.has("transformer.h.0.attn.bias"));
  EXPECT_EQ(ck.names().size(), stored.size() - 1 + 1);  // minus the mask, plus lm_head
  std::map<std::string, at::Tensor> by_name(stored.begin(), stored.end());
  for (const auto& [name, t] : stored) {
    if (name == "h.0.attn.bias") continue;
    const std::string hf = "transformer." + name;
    SCOPED_TRACE(hf);
    const bool conv1d = name.find("c_attn.weight") != std::string::npos ||
                        name.find("c_proj.weight") != std::string::npos ||
                        name.find("c_fc.weight") != std::string::npos;
    at::Tensor want = conv1d ? t.t() : t;
    EXPECT_EQ(ck.shape(hf), want.sizes().vec());
    EXPECT_TRUE(at::equal(ck.load(hf), want));
  }
  at::Tensor c_attn = by_name["h.0.attn.c_attn.weight"].t();  // [3h, h]
  EXPECT_TRUE(
      at::equal(ck.load("transformer.h.0.attn.c_attn.weight", ShardSlice::rows(16, 16)), c_attn.narrow(0, 16, 16)));
  EXPECT_TRUE(at::equal(ck.load("transformer.h.0.attn.c_attn.weight", ShardSlice::cols(4, 8)), c_attn.narrow(1, 4, 8)));
  EXPECT_TRUE(ck.load("transformer.h.0.attn.c_attn.weight", ShardSlice::rows(16, 16)).is_contiguous());
  EXPECT_TRUE(at::equal(ck.load("lm_head.weight"), by_name["wte.weight"]));
  EXPECT_EQ(ck.shape("lm_head.weight"), (std::vector<int64_t>{9, h}));
}

TEST(HfCheckpoint, MissingPiecesAreLoadErrors) {
  ScratchDir dir;
  expect_load_error([&] { HfCheckpoint c(dir.path()); }, {dir.path(), "no config.json"});
  testing::write_file(dir.file("config.json"), std::string(kLlamaConfig));
  expect_load_error([&] { HfCheckpoint c(dir.path()); }, {"no model.safetensors or model.safetensors.index.json"});
  testing::write_file(dir.file("pytorch_model.bin"), std::string("x"));
  expect_load_error([&] { HfCheckpoint c(dir.path()); }, {"pytorch_model.bin checkpoints are not supported"});
  testing::write_file(dir.file("model.safetensors"), std::string("garbage!garbage!"));
  expect_load_error([&] { HfCheckpoint c(dir.path()); }, {dir.file("model.safetensors"), "header length"});
  // Two spellings of one parameter.
  write_safetensors(dir.file("model.safetensors"),
                    {{"model.norm.weight", at::ones({32})}, {"norm.weight", at::ones({32})}});
  expect_load_error([&] { HfCheckpoint c(dir.path()); }, {"'norm.weight' duplicates 'model.norm.weight'"});
  expect_load_error([&] { open_weights(dir.file("nothing-here")); }, {"no such model file or directory"});
}

TEST(HfCheckpoint, TiedLlamaServesLmHeadFromTheEmbedding) {
  ScratchDir dir;
  std::string cfg = kLlamaConfig;
  const std::string untied = "\"tie_word_embeddings\": false";
  cfg.replace(cfg.find(untied), untied.size(), "\"tie_word_embeddings\": true");
  testing::write_file(dir.file("config.json"), cfg);
  at::Tensor e = at::randn({12, 32});
  write_safetensors(dir.file("model.safetensors"), {{"model.embed_tokens.weight", e},
                                                    {"model.layers.0.self_attn.rotary_emb.inv_freq", at::ones({4})}});
  HfCheckpoint ck(dir.path());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"model.embed_tokens.weight", "lm_head.weight"}));
  EXPECT_TRUE(at::equal(ck.load("lm_head.weight", ShardSlice::rows(3, 2)), e.narrow(0, 3, 2)));
}

// generation_config.json's eos ids end a sequence too (transformers'
// generate and vLLM read them there); a bad one names the file.
TEST(HfCheckpoint, GenerationConfigEosIdsEndASequence) {
  ScratchDir dir;
  testing::write_file(dir.file("config.json"), kLlamaConfig);
  write_safetensors(dir.file("model.safetensors"), tiny_llama_tensors());
  testing::write_file(dir.file("generation_config.json"), R"({"eos_token_id": [2, 7], "temperature": 0.6})");
  {
    HfCheckpoint ck(dir.path());
    EXPECT_EQ(ck.config().eos_token_id, 2);
    EXPECT_TRUE(ck.config().is_eos(3)) << "config.json's [2, 3]";
    EXPECT_TRUE(ck.config().is_eos(7));
    EXPECT_FALSE(ck.config().is_eos(5));
  }
  testing::write_file(dir.file("generation_config.json"), R"({"eos_token_id": 99})");
  expect_load_error([&] { HfCheckpoint c(dir.path()); },
                    {"generation_config.json: field 'eos_token_id' holds 99, not a token id of the 12-token"});
}

// A multimodal Gemma 3 as the hub stores it: the text model under
// language_model.model.*, no lm_head (tied), the vision tower and projector
// beside it. Served under transformers' module tree, the image side left out.
TEST(HfCheckpoint, Gemma3MultimodalServesItsTextModelUnderModelLanguageModel) {
  ScratchDir dir;
  testing::write_file(dir.file("config.json"), R"({"model_type": "gemma3", "text_config": {
      "vocab_size": 12, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 1,
      "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16}})");
  at::Tensor e = at::randn({12, 32});
  at::Tensor q = at::randn({32, 32});
  write_safetensors(dir.file("model.safetensors"),
                    {{"language_model.model.embed_tokens.weight", e},
                     {"language_model.model.layers.0.self_attn.q_proj.weight", q},
                     {"vision_tower.vision_model.embeddings.patch_embedding.weight", at::ones({4, 3, 2, 2})},
                     {"multi_modal_projector.mm_input_projection_weight", at::ones({4, 32})}});
  HfCheckpoint ck(dir.path());
  EXPECT_EQ(ck.config().multimodal, "gemma3");
  EXPECT_EQ(ck.names(),
            (std::vector<std::string>{"model.language_model.embed_tokens.weight",
                                      "model.language_model.layers.0.self_attn.q_proj.weight", "lm_head.weight"}));
  EXPECT_TRUE(at::equal(ck.load("model.language_model.layers.0.self_attn.q_proj.weight"), q));
  EXPECT_TRUE(at::equal(ck.load("lm_head.weight"), e));
}

}  // namespace
}  // namespace nnsight
