// GgufWeights: a tiny llama (and gpt2) written by the test, with q/k rows
// permuted the way llama.cpp's converter does, must come back under Hugging
// Face names, in Hugging Face layout, with the config and tokenizer from
// the metadata.
#include "core/gguf/gguf_weights.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <nnsight/error.hpp>

#include "support/expect_load_error.h"
#include "support/gguf_writer.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using testing::expect_load_error;
using testing::GgufWriter;
using testing::ScratchDir;
namespace ggml = testing::ggml;

constexpr int64_t kHidden = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kFfn = 96, kLayers = 2, kVocab = 10;

// llama.cpp's converter, written as an explicit index map: within each head,
// GGUF row 2j + t is Hugging Face row t * head_dim / 2 + j.
at::Tensor permute_like_llama_cpp(const at::Tensor& hf, int64_t heads) {
  const int64_t hd = hf.size(0) / heads;
  at::Tensor out = at::empty_like(hf);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < hd / 2; ++j) {
      for (int64_t t = 0; t < 2; ++t) out[h * hd + 2 * j + t] = hf[h * hd + t * hd / 2 + j];
    }
  }
  return out;
}

struct TinyLlama {
  std::map<std::string, at::Tensor> hf;  // Hugging Face name -> parameter
  GgufWriter writer;
};

// A 2-layer llama with q/k/v biases, written in F32 so loads compare exactly.
TinyLlama make_tiny_llama(bool tied, bool with_bias = true) {
  TinyLlama m;
  at::manual_seed(11);
  GgufWriter& w = m.writer;
  w.kv_string("general.architecture", "llama")
      .kv_string("general.name", "tiny-llama")
      .kv_u32("llama.block_count", kLayers)
      .kv_u32("llama.context_length", 512)
      .kv_u32("llama.embedding_length", kHidden)
      .kv_u32("llama.feed_forward_length", kFfn)
      .kv_u32("llama.attention.head_count", kHeads)
      .kv_u32("llama.attention.head_count_kv", kKvHeads)
      .kv_f32("llama.rope.freq_base", 50000.0f)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_u32("llama.rope.dimension_count", kHeadDim)
      .kv_string("tokenizer.ggml.model", "gpt2")
      .kv_strings("tokenizer.ggml.tokens", {"<s>", "</s>", "a", "b", "ab", "c", "Ġ", "Ġa", "x", "y"})
      .kv_u32("tokenizer.ggml.bos_token_id", 0)
      .kv_u32("tokenizer.ggml.eos_token_id", 1);
  auto add = [&](const std::string& gguf, const std::string& hf, at::Tensor t, int64_t permute_heads = 0) {
    m.hf[hf] = t;
    w.tensor(gguf, permute_heads > 0 ? permute_like_llama_cpp(t, permute_heads) : t);
  };
  add("token_embd.weight", "model.embed_tokens.weight", at::randn({kVocab, kHidden}));
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string g = "blk." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    add(g + "attn_norm.weight", h + "input_layernorm.weight", at::randn({kHidden}));
    add(g + "attn_q.weight", h + "self_attn.q_proj.weight", at::randn({kHeads * kHeadDim, kHidden}), kHeads);
    add(g + "attn_k.weight", h + "self_attn.k_proj.weight", at::randn({kKvHeads * kHeadDim, kHidden}), kKvHeads);
    add(g + "attn_v.weight", h + "self_attn.v_proj.weight", at::randn({kKvHeads * kHeadDim, kHidden}));
    if (with_bias) {
      add(g + "attn_q.bias", h + "self_attn.q_proj.bias", at::randn({kHeads * kHeadDim}), kHeads);
      add(g + "attn_k.bias", h + "self_attn.k_proj.bias", at::randn({kKvHeads * kHeadDim}), kKvHeads);
      add(g + "attn_v.bias", h + "self_attn.v_proj.bias", at::randn({kKvHeads * kHeadDim}));
    }
    add(g + "attn_output.weight", h + "self_attn.o_proj.weight", at::randn({kHidden, kHeads * kHeadDim}));
    add(g + "ffn_norm.weight", h + "post_attention_layernorm.weight", at::randn({kHidden}));
    add(g + "ffn_gate.weight", h + "mlp.gate_proj.weight", at::randn({kFfn, kHidden}));
    add(g + "ffn_up.weight", h + "mlp.up_proj.weight", at::randn({kFfn, kHidden}));
    add(g + "ffn_down.weight", h + "mlp.down_proj.weight", at::randn({kHidden, kFfn}));
  }
  add("output_norm.weight", "model.norm.weight", at::randn({kHidden}));
  if (!tied) add("output.weight", "lm_head.weight", at::randn({kVocab, kHidden}));
  return m;
}

TEST(GgufWeights, LlamaConfigComesFromMetadata) {
  ScratchDir dir;
  TinyLlama m = make_tiny_llama(/*tied=*/true);
  m.writer.write(dir.file("tiny.gguf"));
  GgufWeights w(dir.file("tiny.gguf"));
  const ModelConfig& c = w.config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.name, "tiny-llama");
  EXPECT_EQ(c.vocab_size, kVocab);
  EXPECT_EQ(c.hidden_size, kHidden);
  EXPECT_EQ(c.intermediate_size, kFfn);
  EXPECT_EQ(c.num_layers, kLayers);
  EXPECT_EQ(c.num_heads, kHeads);
  EXPECT_EQ(c.num_kv_heads, kKvHeads);
  EXPECT_EQ(c.head_dim, kHeadDim);
  EXPECT_EQ(c.max_position, 512);
  EXPECT_NEAR(c.norm_eps, 1e-6, 1e-12);
  EXPECT_EQ(c.rope_theta, 50000.0);
  EXPECT_EQ(c.rope_scaling.factor, 0.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(w.describe(), dir.file("tiny.gguf"));
}

// llama.cpp's end-of-turn and end-of-message ids end a sequence too; one
// equal to eos counts once; one outside the vocabulary is ignored (llama.cpp
// warns), not a load error.
TEST(GgufWeights, EndOfTurnIdsEndASequence) {
  ScratchDir dir;
  {
    TinyLlama m = make_tiny_llama(/*tied=*/true);
    m.writer.kv_u32("tokenizer.ggml.eot_token_id", 8).kv_u32("tokenizer.ggml.eom_token_id", 1);
    m.writer.write(dir.file("eot.gguf"));
    const GgufWeights w(dir.file("eot.gguf"));
    const ModelConfig& c = w.config();
    EXPECT_EQ(c.eos_token_id, 1);
    EXPECT_TRUE(c.is_eos(8));
    EXPECT_EQ(c.more_eos_token_ids, (std::vector<int64_t>{8}));
  }
  {
    TinyLlama m = make_tiny_llama(/*tied=*/true);
    m.writer.kv_u32("tokenizer.ggml.eot_token_id", 5000);
    m.writer.write(dir.file("bad.gguf"));
    const GgufWeights w(dir.file("bad.gguf"));
    const ModelConfig& c = w.config();
    EXPECT_TRUE(c.more_eos_token_ids.empty());
  }
}

TEST(GgufWeights, EveryTensorEqualsTheHuggingFaceParameter) {
  ScratchDir dir;
  TinyLlama m = make_tiny_llama(/*tied=*/false);
  m.writer.write(dir.file("tiny.gguf"));
  GgufWeights w(dir.file("tiny.gguf"));
  std::vector<std::string> names = w.names();
  ASSERT_EQ(names.size(), m.hf.size());
  for (const auto& [name, expected] : m.hf) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(w.has(name));
    EXPECT_EQ(w.shape(name), expected.sizes().vec());
    at::Tensor got = w.load(name);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(got, expected));
  }
  EXPECT_FALSE(w.config().tie_word_embeddings);
  EXPECT_FALSE(w.has("blk.0.attn_q.weight"));  // GGUF names are not served
  expect_load_error([&] { w.load("model.layers.9.mlp.up_proj.weight"); },
                    {dir.file("tiny.gguf"), "no tensor 'model.layers.9.mlp.up_proj.weight'"});
}

TEST(GgufWeights, PermutedProjectionsAreNotWhatTheFileHolds) {
  // Guards the test itself: the permutation must actually move rows.
  ScratchDir dir;
  TinyLlama m = make_tiny_llama(true);
  m.writer.write(dir.file("tiny.gguf"));
  GgufWeights w(dir.file("tiny.gguf"));
  at::Tensor raw = w.file().dequantize(w.file().tensor("blk.0.attn_q.weight"));
  EXPECT_FALSE(at::equal(raw, m.hf["model.layers.0.self_attn.q_proj.weight"]));
  EXPECT_TRUE(at::equal(raw, permute_like_llama_cpp(m.hf["model.layers.0.self_attn.q_proj.weight"], kHeads)));
}

TEST(GgufWeights, RowAndColumnSlicesEqualSlicesOfTheParameter) {
  ScratchDir dir;
  TinyLlama m = make_tiny_llama(true);
  m.writer.write(dir.file("tiny.gguf"));
  GgufWeights w(dir.file("tiny.gguf"));
  const std::string q = "model.layers.1.self_attn.q_proj.weight";
  const std::string k = "model.layers.1.self_attn.k_proj.weight";
  const std::string kb = "model.layers.1.self_attn.k_proj.bias";
  const std::string up = "model.layers.0.mlp.up_proj.weight";
  const std::string down = "model.layers.0.mlp.down_proj.weight";
  struct Case {
    std::string name;
    ShardSlice slice;
  };
  const Case cases[] = {
      {q, ShardSlice::rows(16, 32)},  // two whole heads
      {q, ShardSlice::rows(5, 20)},   // not head-aligned
      {q, ShardSlice::rows(63, 1)},
      {k, ShardSlice::rows(16, 16)},  // second kv head
      {k, ShardSlice::cols(8, 24)},
      {kb, ShardSlice::rows(3, 20)},
      {up, ShardSlice::rows(48, 48)},
      {down, ShardSlice::cols(0, 48)},
      {down, ShardSlice::cols(48, 48)},
      {"model.norm.weight", ShardSlice::rows(32, 32)},
      {"lm_head.weight", ShardSlice::rows(5, 5)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + " dim " + std::to_string(c.slice.dim) + " start " + std::to_string(c.slice.start));
    at::Tensor full = c.name == "lm_head.weight" ? m.hf["model.embed_tokens.weight"] : m.hf[c.name];
    at::Tensor got = w.load(c.name, c.slice);
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_TRUE(at::equal(got, full.narrow(c.slice.dim, c.slice.start, c.slice.length)));
  }
  EXPECT_EQ(w.load(q, ShardSlice::rows(8, 0)).size(0), 0);
  expect_load_error([&] { w.load(q, ShardSlice::rows(60, 8)); }, {q, "out of range"});
  expect_load_error([&] { w.load("model.norm.weight", ShardSlice::cols(0, 1)); }, {"out of range"});
  expect_load_error([&] { w.load(q, ShardSlice::rows(-1, 2)); }, {"out of range"});
}

TEST(GgufWeights, TiedLmHeadIsServedFromTheQuantizedEmbedding) {
  ScratchDir dir;
  at::manual_seed(5);
  at::Tensor embd = at::randn({kVocab, kHidden});
  GgufWriter w;
  w.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", kHidden)
      .kv_u32("llama.feed_forward_length", kFfn)
      .kv_u32("llama.attention.head_count", kHeads)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .tensor("token_embd.weight", embd, ggml::Q8_0)
      .write(dir.file("q8.gguf"));
  GgufWeights src(dir.file("q8.gguf"));
  EXPECT_TRUE(src.config().tie_word_embeddings);
  EXPECT_EQ(src.config().num_kv_heads, kHeads);  // head_count_kv defaults to head_count
  EXPECT_EQ(src.names().back(), "lm_head.weight");
  at::Tensor e = src.load("model.embed_tokens.weight");
  EXPECT_TRUE(at::equal(src.load("lm_head.weight"), e));
  // Q8_0 keeps each value within half a quantization step (amax / 254) of the original.
  at::Tensor step = embd.reshape({-1, 32}).abs().amax(1, true) / 254.0;
  at::Tensor err = (e - embd).reshape({-1, 32}).abs();
  EXPECT_TRUE((err <= step * 1.01 + 1e-7).all().item<bool>());
}

TEST(GgufWeights, Gpt2NamesShapesAndConfig) {
  ScratchDir dir;
  at::manual_seed(2);
  const int64_t h = 32, ffn = 128, vocab = 7, ctx = 16;
  std::map<std::string, at::Tensor> hf;
  GgufWriter w;
  w.kv_string("general.architecture", "gpt2")
      .kv_u32("gpt2.block_count", 1)
      .kv_u32("gpt2.context_length", ctx)
      .kv_u32("gpt2.embedding_length", h)
      .kv_u32("gpt2.feed_forward_length", ffn)
      .kv_u32("gpt2.attention.head_count", 4)
      .kv_f32("gpt2.attention.layer_norm_epsilon", 1e-5f);
  auto add = [&](const std::string& g, const std::string& name, at::Tensor t) {
    hf[name] = t;
    w.tensor(g, t);
  };
  add("token_embd.weight", "transformer.wte.weight", at::randn({vocab, h}));
  add("position_embd.weight", "transformer.wpe.weight", at::randn({ctx, h}));
  add("blk.0.attn_norm.weight", "transformer.h.0.ln_1.weight", at::randn({h}));
  add("blk.0.attn_norm.bias", "transformer.h.0.ln_1.bias", at::randn({h}));
  // llama.cpp's converter already transposed Conv1D weights to [out, in].
  add("blk.0.attn_qkv.weight", "transformer.h.0.attn.c_attn.weight", at::randn({3 * h, h}));
  add("blk.0.attn_qkv.bias", "transformer.h.0.attn.c_attn.bias", at::randn({3 * h}));
  add("blk.0.attn_output.weight", "transformer.h.0.attn.c_proj.weight", at::randn({h, h}));
  add("blk.0.attn_output.bias", "transformer.h.0.attn.c_proj.bias", at::randn({h}));
  add("blk.0.ffn_norm.weight", "transformer.h.0.ln_2.weight", at::randn({h}));
  add("blk.0.ffn_norm.bias", "transformer.h.0.ln_2.bias", at::randn({h}));
  add("blk.0.ffn_up.weight", "transformer.h.0.mlp.c_fc.weight", at::randn({ffn, h}));
  add("blk.0.ffn_up.bias", "transformer.h.0.mlp.c_fc.bias", at::randn({ffn}));
  add("blk.0.ffn_down.weight", "transformer.h.0.mlp.c_proj.weight", at::randn({h, ffn}));
  add("blk.0.ffn_down.bias", "transformer.h.0.mlp.c_proj.bias", at::randn({h}));
  add("output_norm.weight", "transformer.ln_f.weight", at::randn({h}));
  add("output_norm.bias", "transformer.ln_f.bias", at::randn({h}));
  add("output.weight", "lm_head.weight", at::randn({vocab, h}));
  w.write(dir.file("gpt2.gguf"));
  GgufWeights src(dir.file("gpt2.gguf"));
  const ModelConfig& c = src.config();
  EXPECT_EQ(c.architecture, "gpt2");
  EXPECT_EQ(c.hidden_size, h);
  EXPECT_EQ(c.intermediate_size, ffn);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.max_position, ctx);
  EXPECT_EQ(c.vocab_size, vocab);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_TRUE(c.attention_bias && c.mlp_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(src.names().size(), hf.size());
  for (const auto& [name, t] : hf) {
    SCOPED_TRACE(name);
    EXPECT_EQ(src.shape(name), t.sizes().vec());
    EXPECT_TRUE(at::equal(src.load(name), t));  // gpt2 q/k are not permuted
  }
}

GgufWriter minimal_llama() {
  GgufWriter w;
  w.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", kHidden)
      .kv_u32("llama.feed_forward_length", kFfn)
      .kv_u32("llama.attention.head_count", kHeads)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_f32("llama.rope.freq_base", 500000.0f);
  w.tensor("token_embd.weight", at::zeros({kVocab, kHidden}));
  return w;
}

TEST(GgufWeights, StructuralProblemsAreLoadErrors) {
  ScratchDir dir;
  const std::string p = dir.file("bad.gguf");
  GgufWriter w1;
  w1.kv_string("general.architecture", "falcon").write(p);
  expect_load_error([&] { GgufWeights w(p); }, {p, "architecture 'falcon' is not supported"});

  GgufWriter().kv_u32("llama.block_count", 1).write(p);
  expect_load_error([&] { GgufWeights w(p); }, {p, "missing metadata key 'general.architecture'"});

  minimal_llama().tensor("blk.0.attn_q_norm.weight", at::ones({kHidden})).write(p);
  expect_load_error([&] { GgufWeights w(p); }, {p, "tensor 'blk.0.attn_q_norm.weight'", "no Hugging Face counterpart"});

  minimal_llama().tensor("blk.3.ffn_up.weight", at::ones({kFfn, kHidden})).write(p);
  expect_load_error([&] { GgufWeights w(p); }, {"tensor 'blk.3.ffn_up.weight'", "layer 3", "1 layers"});

  minimal_llama().tensor("blk.0.attn_q.weight", at::ones({kHidden - 16, kHidden})).write(p);
  expect_load_error([&] { GgufWeights w(p); }, {"tensor 'blk.0.attn_q.weight'", "48 rows"});

  minimal_llama().kv_string("llama.rope.scaling.type", "linear").write(p);
  expect_load_error([&] { GgufWeights w(p); }, {"llama.rope.scaling.type", "'linear' is not supported"});

  minimal_llama().kv_u32("llama.rope.dimension_count", 8).write(p);
  expect_load_error([&] { GgufWeights w(p); }, {"llama.rope.dimension_count", "partial rotary"});

  GgufWriter w2 = minimal_llama();
  w2.kv_u32("tokenizer.ggml.eos_token_id", 99).write(p);
  expect_load_error([&] { GgufWeights w(p); }, {p, "eos_token_id", "99"});

  GgufWriter w3;
  w3.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", kHidden)
      .kv_u32("llama.feed_forward_length", kFfn)
      .kv_u32("llama.attention.head_count", 3)  // does not divide 64
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .tensor("token_embd.weight", at::zeros({kVocab, kHidden}))
      .write(p);
  expect_load_error([&] { GgufWeights w(p); }, {p, "num_heads = 3", "does not divide hidden_size = 64"});

  GgufWriter w4 = minimal_llama();
  w4.kv_f32("llama.embedding_length", 64.0f).write(p);  // duplicate key with another type
  expect_load_error([&] { GgufWeights w(p); }, {"duplicate metadata key 'llama.embedding_length'"});
}

// Llama-3 divisors as Hugging Face computes them (_compute_llama3_parameters),
// written independently of the library.
std::vector<float> hf_llama3_divisors(double theta, int64_t head_dim, double factor, double low, double high,
                                      double orig) {
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    double inv_freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    double wavelen = 2 * M_PI / inv_freq;
    double scaled = inv_freq;
    if (wavelen > orig / low) scaled = inv_freq / factor;
    if (!(wavelen < orig / high) && !(wavelen > orig / low)) {
      double smooth = (orig / wavelen - low) / (high - low);
      scaled = (1 - smooth) * inv_freq / factor + smooth * inv_freq;
    }
    out.push_back(static_cast<float>(inv_freq / scaled));
  }
  return out;
}

TEST(GgufWeights, RopeFreqsTensorBecomesLlama3Scaling) {
  ScratchDir dir;
  const std::string p = dir.file("rope.gguf");
  // head_dim 64 (hidden 256 / 4 heads) and theta 500000 as in Llama 3.2.
  std::vector<float> divisors = hf_llama3_divisors(500000.0, 64, 32.0, 1.0, 4.0, 8192.0);
  GgufWriter w;
  w.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", 256)
      .kv_u32("llama.feed_forward_length", 512)
      .kv_u32("llama.attention.head_count", 4)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_f32("llama.rope.freq_base", 500000.0f)
      .tensor("token_embd.weight", at::zeros({kVocab, 256}))
      .tensor_f32("rope_freqs.weight", {32}, divisors)
      .write(p);
  GgufWeights src(p);
  const RopeScaling& r = src.config().rope_scaling;
  EXPECT_NEAR(r.factor, 32.0, 1e-3);
  EXPECT_NEAR(r.low_freq_factor, 1.0, 1e-3);
  EXPECT_NEAR(r.high_freq_factor, 4.0, 1e-3);
  EXPECT_EQ(r.original_max_position, 8192);
  EXPECT_FALSE(src.has("rope_freqs.weight"));

  divisors[3] = 7.0f;  // not of the Llama-3 form
  GgufWriter w2;
  w2.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", 256)
      .kv_u32("llama.feed_forward_length", 512)
      .kv_u32("llama.attention.head_count", 4)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_f32("llama.rope.freq_base", 500000.0f)
      .tensor("token_embd.weight", at::zeros({kVocab, 256}))
      .tensor_f32("rope_freqs.weight", {32}, divisors)
      .write(p);
  expect_load_error([&] { GgufWeights s(p); }, {p, "rope_freqs.weight", "Llama-3"});
}

TEST(GgufWeights, TokenizerSpecFromMetadata) {
  ScratchDir dir;
  const std::string p = dir.file("tok.gguf");
  auto base = [] {
    GgufWriter w = minimal_llama();
    w.kv_string("tokenizer.ggml.model", "gpt2")
        .kv_strings("tokenizer.ggml.tokens", {"<|endoftext|>", "a", "b", "ab", "Ġ"})
        .kv_strings("tokenizer.ggml.merges", {"a b"})
        .kv_i32s("tokenizer.ggml.token_type", {3, 1, 1, 1, 1})
        .kv_u32("tokenizer.ggml.bos_token_id", 0)
        .kv_u32("tokenizer.ggml.eos_token_id", 0)
        .kv_u32("tokenizer.ggml.unknown_token_id", 1)
        .kv_u32("tokenizer.ggml.padding_token_id", 4);
    return w;
  };
  GgufWriter w1 = base();
  w1.kv_string("tokenizer.ggml.pre", "smollm").write(p);
  TokenizerSpec s = GgufWeights(p).tokenizer_spec();
  EXPECT_EQ(s.tokens, (std::vector<std::string>{"<|endoftext|>", "a", "b", "ab", "Ġ"}));
  EXPECT_EQ(s.merges, (std::vector<std::string>{"a b"}));
  EXPECT_EQ(s.token_types, (std::vector<int32_t>{3, 1, 1, 1, 1}));
  EXPECT_EQ(s.pre, "smollm");
  EXPECT_EQ(s.bos_id, 0);
  EXPECT_EQ(s.eos_id, 0);
  EXPECT_EQ(s.unk_id, 1);
  EXPECT_EQ(s.pad_id, 4);
  EXPECT_FALSE(s.add_bos);  // llama.cpp's default for BPE vocabularies
  EXPECT_FALSE(s.add_eos);

  GgufWriter w2 = base();
  w2.kv_string("tokenizer.ggml.pre", "llama-bpe").write(p);
  EXPECT_TRUE(GgufWeights(p).tokenizer_spec().add_bos);  // Llama 3 pre-tokenizer default

  GgufWriter w3 = base();
  w3.kv_string("tokenizer.ggml.pre", "llama-bpe")
      .kv_bool("tokenizer.ggml.add_bos_token", false)
      .kv_bool("tokenizer.ggml.add_eos_token", true)
      .write(p);
  TokenizerSpec s3 = GgufWeights(p).tokenizer_spec();
  EXPECT_FALSE(s3.add_bos);  // an explicit key wins
  EXPECT_TRUE(s3.add_eos);

  GgufWriter w4 = base();
  w4.write(p);
  EXPECT_EQ(GgufWeights(p).tokenizer_spec().pre, "default");

  GgufWriter w5 = minimal_llama();
  w5.kv_string("tokenizer.ggml.model", "t5").kv_strings("tokenizer.ggml.tokens", {"a"}).write(p);
  expect_load_error([&] { GgufWeights(p).tokenizer_spec(); }, {p, "tokenizer.ggml.model", "'t5'"});
  // SentencePiece vocabularies ("llama") need their scores...
  GgufWriter w5b = minimal_llama();
  w5b.kv_string("tokenizer.ggml.model", "llama").kv_strings("tokenizer.ggml.tokens", {"a"}).write(p);
  expect_load_error([&] { GgufWeights(p).tokenizer_spec(); }, {p, "tokenizer.ggml.scores", "is missing"});
  // ... and add BOS and a dummy prefix unless told otherwise.
  GgufWriter w5c = minimal_llama();
  w5c.kv_string("tokenizer.ggml.model", "llama")
      .kv_strings("tokenizer.ggml.tokens", {"<s>", "a"})
      .kv_f32s("tokenizer.ggml.scores", {0.0f, -1.0f})
      .kv_u32("tokenizer.ggml.bos_token_id", 0)
      .write(p);
  TokenizerSpec s5 = GgufWeights(p).tokenizer_spec();
  EXPECT_EQ(s5.model, "llama");
  EXPECT_EQ(s5.scores, (std::vector<float>{0.0f, -1.0f}));
  EXPECT_TRUE(s5.add_bos);
  EXPECT_TRUE(s5.add_space_prefix);

  GgufWriter w6 = minimal_llama();
  w6.kv_string("tokenizer.ggml.model", "gpt2")
      .kv_strings("tokenizer.ggml.tokens", {"a", "b"})
      .kv_i32s("tokenizer.ggml.token_type", {1})
      .write(p);
  expect_load_error([&] { GgufWeights(p).tokenizer_spec(); }, {"tokenizer.ggml.token_type", "1 entries", "2 tokens"});

  GgufWriter w7 = minimal_llama();
  w7.kv_string("tokenizer.ggml.model", "gpt2")
      .kv_strings("tokenizer.ggml.tokens", {"a", "b"})
      .kv_u32("tokenizer.ggml.unknown_token_id", 2)
      .write(p);
  expect_load_error([&] { GgufWeights(p).tokenizer_spec(); }, {"unknown_token_id", "= 2", "2 tokens"});
}

TEST(GgufWeights, OpenWeightsPicksTheGgufLoader) {
  ScratchDir dir;
  TinyLlama m = make_tiny_llama(true, false);
  m.writer.write(dir.file("model.gguf"));
  std::unique_ptr<WeightSource> src = open_weights(dir.file("model.gguf"));
  ASSERT_NE(dynamic_cast<GgufWeights*>(src.get()), nullptr);
  EXPECT_FALSE(src->config().attention_bias);
  // The magic is enough when the extension is missing.
  m.writer.write(dir.file("model.bin"));
  EXPECT_NE(dynamic_cast<GgufWeights*>(open_weights(dir.file("model.bin")).get()), nullptr);
  expect_load_error([&] { open_weights(dir.file("missing.gguf")); },
                    {"no such model file or directory: " + dir.file("missing.gguf")});
  testing::write_file(dir.file("notes.txt"), std::string("hello"));
  expect_load_error([&] { open_weights(dir.file("notes.txt")); }, {"notes.txt", "unrecognized model file"});
}

}  // namespace
}  // namespace nnsight

namespace nnsight {
namespace {

// Block-quantized tensors served packed (load_packed) decode to exactly what
// load() serves, q/k rows included (through a row index), whole or sliced.
TEST(GgufWeights, PackedTensorsEqualTheDequantizedLoads) {
  ScratchDir dir;
  at::manual_seed(8);
  GgufWriter w;
  w.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.embedding_length", kHidden)
      .kv_u32("llama.feed_forward_length", kFfn)
      .kv_u32("llama.attention.head_count", kHeads)
      .kv_u32("llama.attention.head_count_kv", kKvHeads)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .tensor("token_embd.weight", at::randn({kVocab, kHidden}), ggml::Q8_0)
      .tensor("blk.0.attn_norm.weight", at::randn({kHidden}))
      .tensor("blk.0.attn_q.weight", permute_like_llama_cpp(at::randn({kHeads * kHeadDim, kHidden}), kHeads),
              ggml::Q8_0)
      .tensor("blk.0.attn_k.weight", permute_like_llama_cpp(at::randn({kKvHeads * kHeadDim, kHidden}), kKvHeads),
              ggml::Q8_0)
      .tensor("blk.0.ffn_down.weight", at::randn({kHidden, kFfn}), ggml::Q8_0)
      .write(dir.file("q8.gguf"));
  GgufWeights packed(dir.file("q8.gguf"), /*keep_packed=*/true);
  for (const std::string name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                                 "model.layers.0.mlp.down_proj.weight", "lm_head.weight"}) {
    SCOPED_TRACE(name);
    std::optional<kernels::PackedMatrix> p = packed.load_packed(name);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->type, kernels::PackedType::Q8_0);
    EXPECT_TRUE(at::equal(p->dequantize(), packed.load(name)));
    auto rows = packed.load_packed(name, ShardSlice::rows(3, 5));
    ASSERT_TRUE(rows.has_value());
    EXPECT_TRUE(at::equal(rows->dequantize(), packed.load(name, ShardSlice::rows(3, 5))));
    auto cols = packed.load_packed(name, ShardSlice::cols(32, 32));
    ASSERT_TRUE(cols.has_value());
    EXPECT_TRUE(at::equal(cols->dequantize(), packed.load(name, ShardSlice::cols(32, 32))));
    // A column slice that cuts blocks is not served packed.
    EXPECT_FALSE(packed.load_packed(name, ShardSlice::cols(16, 32)).has_value());
  }
  // Float tensors, and sources not opened for packed weights, answer nullopt.
  EXPECT_FALSE(packed.load_packed("model.layers.0.input_layernorm.weight").has_value());
  EXPECT_FALSE(GgufWeights(dir.file("q8.gguf")).load_packed("lm_head.weight").has_value());
  expect_load_error([&] { packed.load_packed("lm_head.weight", ShardSlice::rows(8, 5)); },
                    {"q8.gguf", "lm_head.weight", "out of range"});
}

// Mixture of experts: llama.cpp stacks a layer's experts into one tensor
// [experts, rows, cols]; each expert comes back under its own Hugging Face
// name, packed too (a row range of the stack).
TEST(GgufWeights, StackedExpertsAreServedOneByOne) {
  ScratchDir dir;
  at::manual_seed(9);
  constexpr int64_t kExperts = 3, kExpertFfn = 32;
  at::Tensor gate = at::randn({kExperts, kExpertFfn, kHidden}), down = at::randn({kExperts, kHidden, kExpertFfn});
  at::Tensor router = at::randn({kExperts, kHidden});
  auto moe_file = [&](const std::string& arch, uint32_t type) {
    GgufWriter w;
    w.kv_string("general.architecture", arch)
        .kv_u32(arch + ".block_count", 1)
        .kv_u32(arch + ".embedding_length", kHidden)
        .kv_u32(arch + ".feed_forward_length", kFfn)
        .kv_u32(arch + ".attention.head_count", kHeads)
        .kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f)
        .kv_u32(arch + ".expert_count", kExperts)
        .kv_u32(arch + ".expert_used_count", 2)
        .tensor("token_embd.weight", at::zeros({kVocab, kHidden}))
        .tensor("blk.0.ffn_gate_inp.weight", router)
        .tensor("blk.0.ffn_gate_exps.weight", gate, type)
        .tensor("blk.0.ffn_down_exps.weight", down, type);
    const std::string path = dir.file(arch + std::to_string(type) + ".gguf");
    w.write(path);
    return path;
  };
  {
    GgufWeights g(moe_file("llama", ggml::F32));
    EXPECT_EQ(g.config().architecture, "mixtral");
    EXPECT_EQ(g.config().num_experts, kExperts);
    EXPECT_EQ(g.config().num_experts_per_token, 2);
    EXPECT_TRUE(at::equal(g.load("model.layers.0.block_sparse_moe.gate.weight"), router));
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string x = "model.layers.0.block_sparse_moe.experts." + std::to_string(e);
      EXPECT_EQ(g.shape(x + ".w1.weight"), (std::vector<int64_t>{kExpertFfn, kHidden}));
      EXPECT_TRUE(at::equal(g.load(x + ".w1.weight"), gate[e]));
      EXPECT_TRUE(at::equal(g.load(x + ".w2.weight"), down[e]));
      EXPECT_TRUE(at::equal(g.load(x + ".w1.weight", ShardSlice::rows(8, 16)), gate[e].narrow(0, 8, 16)));
      EXPECT_TRUE(at::equal(g.load(x + ".w2.weight", ShardSlice::cols(16, 16)), down[e].narrow(1, 16, 16)));
    }
  }
  {
    GgufWeights g(moe_file("qwen3moe", ggml::Q8_0), /*keep_packed=*/true);
    EXPECT_EQ(g.config().architecture, "qwen3_moe");
    EXPECT_TRUE(g.config().norm_topk_prob);  // llama.cpp's assumption when the file says nothing
    EXPECT_EQ(g.config().moe_layers, std::vector<bool>{true});
    for (int64_t e = 0; e < kExperts; ++e) {
      const std::string name = "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_proj.weight";
      SCOPED_TRACE(name);
      std::optional<kernels::PackedMatrix> p = g.load_packed(name);
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(p->rows, kExpertFfn);
      EXPECT_TRUE(at::equal(p->dequantize(), g.load(name)));
      EXPECT_LE((g.load(name) - gate[e]).abs().max().item<double>(), 0.05);  // Q8_0 of N(0, 1)
      auto rows = g.load_packed(name, ShardSlice::rows(8, 16));
      ASSERT_TRUE(rows.has_value());
      EXPECT_TRUE(at::equal(rows->dequantize(), g.load(name, ShardSlice::rows(8, 16))));
    }
  }
  // A stack whose first dimension is not the expert count is refused, naming the tensor.
  GgufWriter bad = minimal_llama();
  bad.kv_u32("llama.expert_count", 2).kv_u32("llama.expert_used_count", 1).tensor("blk.0.ffn_gate_exps.weight", gate);
  bad.write(dir.file("bad_moe.gguf"));
  expect_load_error([&] { GgufWeights g(dir.file("bad_moe.gguf")); },
                    {"bad_moe.gguf", "blk.0.ffn_gate_exps.weight", "[3, 32, 64]", "2 experts"});
}

// Gemma 2 and 3: what llama.cpp assumes where the file is silent.
TEST(GgufWeights, GemmaTwoAndThreeConfigFollowsLlamaCpp) {
  ScratchDir dir;
  auto gemma_file = [&](const std::string& arch, int64_t layers) {
    GgufWriter w;
    w.kv_string("general.architecture", arch)
        .kv_u32(arch + ".block_count", static_cast<uint32_t>(layers))
        .kv_u32(arch + ".embedding_length", kHidden)
        .kv_u32(arch + ".feed_forward_length", kFfn)
        .kv_u32(arch + ".attention.head_count", kHeads)
        .kv_u32(arch + ".attention.head_count_kv", kKvHeads)
        .kv_u32(arch + ".attention.key_length", 32)
        .kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f)
        .kv_u32(arch + ".attention.sliding_window", 5);
    if (arch == "gemma3") w.kv_string("gemma3.rope.scaling.type", "linear").kv_f32("gemma3.rope.scaling.factor", 8.f);
    w.tensor("token_embd.weight", at::zeros({kVocab, kHidden}));
    const std::string path = dir.file(arch + ".gguf");
    w.write(path);
    return path;
  };
  GgufWeights g2(gemma_file("gemma2", 4));
  EXPECT_EQ(g2.config().architecture, "gemma2");
  EXPECT_EQ(g2.config().query_pre_attn_scalar, 32.0);  // head_dim
  EXPECT_EQ(g2.config().sliding_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(g2.config().attn_logit_softcap, 50.0);
  EXPECT_EQ(g2.config().final_logit_softcap, 30.0);
  EXPECT_TRUE(g2.config().tie_word_embeddings);
  GgufWeights g3(gemma_file("gemma3", 7));
  EXPECT_EQ(g3.config().architecture, "gemma3_text");
  EXPECT_EQ(g3.config().sliding_window, 5);
  EXPECT_EQ(g3.config().sliding_layers, (std::vector<bool>{true, true, true, true, true, false, true}));
  EXPECT_EQ(g3.config().rope_local_theta, 10000.0);
  EXPECT_EQ(g3.config().rope_scaling.type, "linear");
  EXPECT_EQ(g3.config().rope_scaling.factor, 8.0);
}

}  // namespace
}  // namespace nnsight
