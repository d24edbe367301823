#include "core/gguf/gguf_weights.h"

#include "core/log.h"

#include <ATen/ATen.h>

#include <set>

#include <nnsight/error.hpp>

#include "core/gguf/gguf_eog_tokens.h"
#include "core/gguf/gguf_tensor_names.h"
#include "core/gguf/gguf_tokenizer_spec.h"
#include "core/gguf/qk_permutation.h"
#include "core/shape_string.h"
#include "core/rope_scaling_factors.h"

namespace nnsight {
namespace {

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Layer index of "blk.N.*", -1 otherwise (the name was validated by the mapping).
int64_t layer_of(const std::string& gguf_name) {
  if (gguf_name.compare(0, 4, "blk.") != 0) return -1;
  return std::stoll(gguf_name.substr(4, gguf_name.find('.', 4) - 4));
}

}  // namespace

GgufWeights::GgufWeights(const std::string& path, bool keep_packed) : file_(path), keep_packed_(keep_packed) {
  read_config();
  map_tensors();
  try {
    config_.validate();
  } catch (const ConfigError& e) {
    throw LoadError(file_.path() + ": " + e.what());
  }
}

void GgufWeights::read_config() {
  const GgufFile& f = file_;
  const std::string arch = f.get_string("general.architecture");
  static const std::set<std::string> kSupported = {"llama", "qwen2",   "gpt2",  "qwen3",  "qwen3moe", "olmo2",
                                                   "phi3",  "gptneox", "gemma", "gemma2", "gemma3"};
  if (!kSupported.count(arch)) {
    throw LoadError(
        f.path() + ": architecture '" + arch +
        "' is not supported (supported: llama (and Mixtral-style MoE), qwen2, gpt2, qwen3, qwen3moe, olmo2, "
        "phi3, gptneox, gemma, gemma2, gemma3; load other models from their Hugging Face directory)");
  }
  const std::string p = arch + ".";
  ModelConfig& c = config_;
  gguf_arch_ = arch;
  c.architecture = arch == "gptneox"    ? "gpt_neox"
                   : arch == "gemma3"   ? "gemma3_text"
                   : arch == "qwen3moe" ? "qwen3_moe"
                   : arch == "qwen2"    ? "llama"  // q/k/v biases; llama.cpp stores its q/k rows unpermuted
                                        : arch;
  if (arch == "qwen2") c.model_type = "qwen2";
  c.name = f.get_string_or("general.name", basename_of(f.path()));
  c.num_layers = f.get_int(p + "block_count");
  c.hidden_size = f.get_int(p + "embedding_length");
  c.intermediate_size = f.get_int(p + "feed_forward_length");
  c.num_heads = f.get_int(p + "attention.head_count");
  c.num_kv_heads = f.get_int_or(p + "attention.head_count_kv", c.num_heads);
  c.head_dim = f.get_int_or(p + "attention.key_length", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_position = f.get_int_or(p + "context_length", c.max_position);
  c.bos_token_id = f.get_int_or("tokenizer.ggml.bos_token_id", -1);
  c.eos_token_id = f.get_int_or("tokenizer.ggml.eos_token_id", -1);

  const GgufTensorInfo& embd = f.tensor("token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != c.hidden_size) {
    throw LoadError(f.path() + ": tensor 'token_embd.weight' has GGUF dims " + shape_string(embd.dims) +
                    ", expected [" + std::to_string(c.hidden_size) + ", vocab]");
  }
  c.vocab_size = embd.dims[1];
  // llama.cpp ends generation at its end-of-turn and end-of-message ids too,
  // and ignores (with a warning) one outside the vocabulary. With a
  // vocabulary, its whole end-of-generation set decides (below), exceptions
  // included.
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const int64_t id = f.get_int_or(key, -1);
    if (id >= c.vocab_size)
      log_warning(f.path() + ": " + key + " = " + std::to_string(id) + " is outside the " +
                  std::to_string(c.vocab_size) + "-token vocabulary; ignored");
    else if (tokens == nullptr)
      c.add_eos_token_id(id);
  }
  // And where llama.cpp also ends it: fill-in-the-middle ids and the
  // end-of-turn tokens it recognizes by their text (gguf_eog_tokens.h).
  if (tokens != nullptr) {
    GgufSpecialIds ids;
    ids.eos = c.eos_token_id;
    ids.eot = f.get_int_or("tokenizer.ggml.eot_token_id", -1);
    ids.eom = f.get_int_or("tokenizer.ggml.eom_token_id", -1);
    ids.fim_pad = f.get_int_or("tokenizer.ggml.fim_pad_token_id", -1);
    ids.fim_rep = f.get_int_or("tokenizer.ggml.fim_rep_token_id", -1);
    ids.fim_sep = f.get_int_or("tokenizer.ggml.fim_sep_token_id", -1);
    for (int64_t id : llama_cpp_eog_ids(tokens->as_string_array(f.describe_key("tokenizer.ggml.tokens")), ids))
      if (id < c.vocab_size) c.add_eos_token_id(id);
  }
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;

  if (arch == "gpt2") {
    c.norm_eps = f.get_float(p + "attention.layer_norm_epsilon");
    c.hidden_act = "gelu_new";
    c.attention_bias = true;
    c.mlp_bias = true;
    return;
  }
  if (arch == "gptneox") {
    // Pythia: LayerNorm with biases, GELU (exact, as transformers' Pythia configs say).
    c.norm_eps = f.get_float(p + "attention.layer_norm_epsilon");
    c.hidden_act = "gelu";
    c.attention_bias = true;
    c.mlp_bias = true;
    c.num_kv_heads = c.num_heads;
    c.rope_theta = f.get_float_or(p + "rope.freq_base", c.rope_theta);
    const int64_t rot = f.get_int_or(p + "rope.dimension_count", c.head_dim);
    c.rotary_dim = rot == c.head_dim ? 0 : rot;
    c.parallel_residual = f.get_bool_or(p + "use_parallel_residual", true);
    return;
  }
  c.norm_eps = f.get_float(p + "attention.layer_norm_rms_epsilon");
  const bool gemma = arch == "gemma" || arch == "gemma2" || arch == "gemma3";
  c.hidden_act = gemma ? "gelu_pytorch_tanh" : "silu";
  read_moe_config();
  c.rope_theta = f.get_float_or(p + "rope.freq_base", c.rope_theta);
  c.attention_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.attention_out_bias = f.find_tensor("blk.0.attn_output.bias") != nullptr;  // Qwen2: q/k/v only
  c.mlp_bias = f.find_tensor("blk.0.ffn_up.bias") != nullptr;
  const int64_t rot = f.get_int_or(p + "rope.dimension_count", c.head_dim);
  if (arch == "phi3") {
    if (f.find_tensor("blk.0.attn_qkv.bias") != nullptr) {
      throw LoadError(f.path() + ": tensor 'blk.0.attn_qkv.bias': Phi-3 attention biases are not supported");
    }
    c.rotary_dim = rot == c.head_dim ? 0 : rot;
    c.sliding_window = f.get_int_or(p + "attention.sliding_window", 0);
    const GgufTensorInfo* lf = f.find_tensor("rope_factors_long.weight");
    const GgufTensorInfo* sf = f.find_tensor("rope_factors_short.weight");
    if ((lf == nullptr) != (sf == nullptr)) {
      throw LoadError(f.path() + ": phi3 needs both rope_factors_long.weight and rope_factors_short.weight");
    }
    if (lf != nullptr) {
      auto factors = [&](const GgufTensorInfo& t) {
        at::Tensor v = f.dequantize(t).reshape({-1}).to(at::kDouble);  // [rotary_dim / 2]
        return std::vector<double>(v.data_ptr<double>(), v.data_ptr<double>() + v.numel());
      };
      RopeScaling& r = c.rope_scaling;
      r.type = "longrope";
      r.long_factor = factors(*lf);
      r.short_factor = factors(*sf);
      r.original_max_position = f.get_int_or(p + "rope.scaling.original_context_length", c.max_position);
      r.attention_factor = f.get_float_or(p + "rope.scaling.attn_factor", 1.0);
      if (static_cast<int64_t>(r.long_factor.size()) != rot / 2 || r.short_factor.size() != r.long_factor.size()) {
        throw LoadError(f.path() + ": rope_factors_*.weight must hold rope.dimension_count / 2 = " +
                        std::to_string(rot / 2) + " values");
      }
    }
    return;
  }
  if (rot != c.head_dim) {
    throw LoadError(f.describe_key(p + "rope.dimension_count") + " = " + std::to_string(rot) +
                    ": partial rotary embeddings (head_dim " + std::to_string(c.head_dim) + ") are not supported");
  }
  if (arch == "gemma2" || arch == "gemma3") read_gemma_config();
  const std::string scaling = f.get_string_or(p + "rope.scaling.type", "none");
  if (arch == "gemma3" && scaling == "linear") {
    // Gemma 3 scales the global layers' positions (the local ones keep their own base).
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = f.get_float(p + "rope.scaling.factor");
  } else if (scaling != "none") {
    throw LoadError(f.describe_key(p + "rope.scaling.type") + " = '" + scaling +
                    "' is not supported (only Llama-3 scaling, stored as rope_freqs.weight)");
  }
  if (const GgufTensorInfo* freqs = f.find_tensor("rope_freqs.weight")) {
    at::Tensor t = f.dequantize(*freqs).reshape({-1});  // [head_dim / 2]
    std::vector<float> divisors(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    c.rope_scaling = fit_llama3_rope_scaling(divisors, c.rope_theta, c.head_dim,
                                             f.get_int_or(p + "rope.scaling.original_context_length", 8192),
                                             f.path() + ": tensor 'rope_freqs.weight'");
  }
}

// What llama.cpp reads for Gemma 2 and 3 (llama-model.cpp) and what it
// assumes where the file says nothing: the file has no query_pre_attn_scalar
// (llama.cpp scales by head_dim, by hidden / heads for the 27B sizes),
// Gemma 2's even layers slide, Gemma 3's layers slide except every 6th, with
// rope base 10000 on the sliding ones.
void GgufWeights::read_gemma_config() {
  const GgufFile& f = file_;
  const std::string p = gguf_arch_ + ".";
  ModelConfig& c = config_;
  const bool g2 = gguf_arch_ == "gemma2";
  const bool size_27b = c.num_layers == (g2 ? 46 : 62);
  c.query_pre_attn_scalar = static_cast<double>(size_27b && c.num_heads > 0 ? c.hidden_size / c.num_heads : c.head_dim);
  c.sliding_window =
      g2 ? f.get_int_or(p + "attention.sliding_window", 4096) : f.get_int(p + "attention.sliding_window");
  const int64_t pattern = g2 ? 2 : f.get_int_or(p + "attention.sliding_window_pattern", 6);
  if (pattern <= 0) throw LoadError(f.describe_key(p + "attention.sliding_window_pattern") + " must be positive");
  c.sliding_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  for (int64_t i = 0; i < c.num_layers; ++i) c.sliding_layers[static_cast<size_t>(i)] = i % pattern < pattern - 1;
  if (g2) {
    c.attn_logit_softcap = f.get_float_or(p + "attn_logit_softcapping", 50.0);
    c.final_logit_softcap = f.get_float_or(p + "final_logit_softcapping", 30.0);
  } else {
    c.rope_local_theta = 10000.0;
    c.final_logit_softcap = f.get_float_or(p + "final_logit_softcapping", 0.0);
  }
}

// Mixtral (a "llama" file with experts) and Qwen3-MoE. A layer is sparse
// when it has a router (Qwen3-MoE files may mix dense layers in).
void GgufWeights::read_moe_config() {
  const GgufFile& f = file_;
  const std::string p = gguf_arch_ + ".";
  ModelConfig& c = config_;
  const int64_t experts = f.get_int_or(p + "expert_count", 0);
  if (gguf_arch_ != "llama" && gguf_arch_ != "qwen3moe") return;
  if (gguf_arch_ == "qwen3moe" && experts <= 0)
    throw LoadError(f.describe_key(p + "expert_count") + " must be positive for qwen3moe");
  if (experts <= 0) return;
  c.num_experts = experts;
  c.num_experts_per_token = f.get_int(p + "expert_used_count");
  if (gguf_arch_ == "llama") {
    c.architecture = "mixtral";
    return;
  }
  c.moe_intermediate_size = f.get_int_or(p + "expert_feed_forward_length", c.intermediate_size);
  // llama.cpp renormalizes Qwen3-MoE's top-k weights unless the file says otherwise.
  c.norm_topk_prob = f.get_bool_or(p + "expert_weights_norm", true);
  c.moe_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  for (int64_t i = 0; i < c.num_layers; ++i)
    c.moe_layers[static_cast<size_t>(i)] =
        f.find_tensor("blk." + std::to_string(i) + ".ffn_gate_inp.weight") != nullptr;
}

void GgufWeights::map_tensors() {
  const std::string& arch = gguf_arch_;
  for (const GgufTensorInfo& info : file_.tensors()) {
    if (arch == "llama" && info.name == "rope_freqs.weight") continue;  // folded into config
    if (arch == "phi3" && (info.name == "rope_factors_long.weight" || info.name == "rope_factors_short.weight"))
      continue;  // folded into config
    if (std::optional<GgufExpertName> ex = hf_expert_from_gguf(arch, info.name)) {
      const std::vector<int64_t> shape = info.torch_shape();  // [experts, rows, cols]
      if (shape.size() != 3 || shape[0] != config_.num_experts) {
        throw LoadError(file_.path() + ": tensor '" + info.name + "' has shape " + shape_string(shape) +
                        ", expected [" + std::to_string(config_.num_experts) + " experts, rows, cols]");
      }
      if (layer_of(info.name) >= config_.num_layers) {
        throw LoadError(file_.path() + ": tensor '" + info.name + "' belongs to layer " +
                        std::to_string(layer_of(info.name)) + " but the model has " +
                        std::to_string(config_.num_layers) + " layers");
      }
      for (int64_t i = 0; i < shape[0]; ++i) {
        Entry e;
        e.info = &info;
        e.expert = i;
        order_.push_back(ex->of(i));
        entries_.emplace(ex->of(i), e);
      }
      continue;
    }
    std::optional<std::string> hf = hf_name_from_gguf(arch, info.name);
    if (!hf) {
      throw LoadError(file_.path() + ": tensor '" + info.name + "' has no Hugging Face counterpart in architecture '" +
                      arch + "'");
    }
    int64_t layer = layer_of(info.name);
    if (layer >= config_.num_layers) {
      throw LoadError(file_.path() + ": tensor '" + info.name + "' belongs to layer " + std::to_string(layer) +
                      " but the model has " + std::to_string(config_.num_layers) + " layers");
    }
    Entry e;
    e.info = &info;
    if (arch == "llama" && layer >= 0) {
      const std::string stem = info.name.substr(info.name.find('.', 4) + 1);
      if (stem.compare(0, 7, "attn_q.") == 0) e.permuted_heads = config_.num_heads;
      if (stem.compare(0, 7, "attn_k.") == 0) e.permuted_heads = config_.num_kv_heads;
    }
    if ((arch == "gemma" || arch == "gemma2" || arch == "gemma3") &&
        (info.name.size() > 12 && info.name.compare(info.name.size() - 12, 12, "_norm.weight") == 0))
      e.offset = -1.f;  // llama.cpp's converter stores Gemma's norm weights as 1 + w
    if (arch == "gptneox" && layer >= 0 && info.name.find(".attn_qkv.") != std::string::npos) {
      e.neox_qkv_heads = config_.num_heads;
      if (info.torch_shape()[0] != 3 * config_.hidden_size) {
        throw LoadError(file_.path() + ": tensor '" + info.name + "' should have " +
                        std::to_string(3 * config_.hidden_size) + " rows");
      }
    }
    if (e.permuted_heads > 0) {
      const int64_t rows = info.torch_shape()[0];
      if (config_.head_dim <= 0 || rows != e.permuted_heads * config_.head_dim || config_.head_dim % 2 != 0) {
        throw LoadError(file_.path() + ": tensor '" + info.name + "' has " + std::to_string(rows) + " rows, expected " +
                        std::to_string(e.permuted_heads) + " heads x head_dim " + std::to_string(config_.head_dim));
      }
    }
    order_.push_back(*hf);
    entries_.emplace(*hf, e);
  }
  if (config_.tie_word_embeddings) {
    const std::string embed = arch == "gpt2"      ? "transformer.wte.weight"
                              : arch == "gptneox" ? "gpt_neox.embed_in.weight"
                                                  : "model.embed_tokens.weight";
    const std::string head = arch == "gptneox" ? "embed_out.weight" : "lm_head.weight";
    order_.push_back(head);
    entries_.emplace(head, entries_.at(embed));
  }
}

const GgufWeights::Entry& GgufWeights::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    throw LoadError(file_.path() + ": no tensor '" + name + "' (Hugging Face name)");
  }
  return it->second;
}

std::vector<int64_t> GgufWeights::shape(const std::string& name) const {
  const Entry& e = entry(name);
  std::vector<int64_t> s = e.info->torch_shape();
  if (e.expert >= 0) s.erase(s.begin());  // one expert of [experts, rows, cols]
  return s;
}

TokenizerSpec GgufWeights::tokenizer_spec() const { return tokenizer_spec_from_gguf(file_); }

at::Tensor GgufWeights::read_outer(const GgufTensorInfo& info, int64_t start, int64_t length) const {
  std::vector<int64_t> shape = info.torch_shape();
  const int64_t rows_per_outer = shape[0] == 0 ? 0 : info.rows() / shape[0];
  shape[0] = length;
  return file_.dequantize_rows(info, start * rows_per_outer, length * rows_per_outer).view(shape);
}

at::Tensor GgufWeights::load(const std::string& name, ShardSlice slice) const {
  const Entry& e = entry(name);
  const GgufTensorInfo& info = *e.info;
  const std::vector<int64_t> shape = this->shape(name);
  const int64_t rank = static_cast<int64_t>(shape.size());

  if (!slice.is_whole()) {
    if (slice.dim > 1 || slice.dim >= rank || slice.start < 0 || slice.length < 0 || slice.start > shape[slice.dim] ||
        slice.length > shape[slice.dim] - slice.start) {
      throw LoadError(file_.path() + ": tensor '" + name + "' of shape " + shape_string(shape) + ": slice dim " +
                      std::to_string(slice.dim) + " [" + std::to_string(slice.start) + ", +" +
                      std::to_string(slice.length) + ") is out of range");
    }
  }
  if (!slice.is_whole() && slice.length == 0) {
    std::vector<int64_t> empty_shape = shape;
    empty_shape[slice.dim] = 0;
    return at::empty(empty_shape, at::TensorOptions().dtype(at::kFloat));
  }
  if (e.expert >= 0) {
    // Expert e.expert's rows of the stacked tensor: [rows, cols].
    const int64_t rows = shape[0], first = e.expert * rows;
    if (!slice.is_whole() && slice.dim == 0)
      return file_.dequantize_rows(info, first + slice.start, slice.length).view({slice.length, shape[1]});
    at::Tensor t = file_.dequantize_rows(info, first, rows).view({rows, shape[1]});
    return slice.is_whole() ? t : t.narrow(1, slice.start, slice.length).contiguous();
  }
  auto whole = [&] {
    at::Tensor t = file_.dequantize(info);
    if (e.permuted_heads > 0) t = unpermute_qk_rows(t, e.permuted_heads);
    if (e.neox_qkv_heads > 0) {
      // [3 (q|k|v), heads, head_dim, ...] -> [heads, 3, head_dim, ...]: Hugging Face's per-head order.
      std::vector<int64_t> split = {3, e.neox_qkv_heads, -1};
      for (int64_t i = 1; i < t.dim(); ++i) split.push_back(t.size(i));
      t = t.reshape(split).transpose(0, 1).reshape(t.sizes()).contiguous();
    }
    if (e.offset != 0.f) t = t + e.offset;
    return t;
  };
  if (slice.is_whole()) return whole();
  if (slice.dim == 1 || rank == 1 || e.neox_qkv_heads > 0 || e.offset != 0.f) {
    return whole().narrow(slice.dim, slice.start, slice.length).contiguous();
  }
  if (e.permuted_heads == 0) return read_outer(info, slice.start, slice.length);
  // The permutation stays within a head: dequantize the heads the slice
  // touches, un-permute them, then trim to the slice.
  const int64_t head_dim = shape[0] / e.permuted_heads;
  const int64_t h0 = slice.start / head_dim;
  const int64_t h1 = (slice.start + slice.length + head_dim - 1) / head_dim;
  at::Tensor heads = unpermute_qk_rows(read_outer(info, h0 * head_dim, (h1 - h0) * head_dim), h1 - h0);
  return heads.narrow(0, slice.start - h0 * head_dim, slice.length).contiguous();
}

std::optional<kernels::PackedMatrix> GgufWeights::load_packed(const std::string& name, ShardSlice slice) const {
  if (!keep_packed_) return std::nullopt;
  const Entry& e = entry(name);
  const GgufTensorInfo& info = *e.info;
  const std::vector<int64_t> shape = this->shape(name);
  if (shape.size() != 2 || !kernels::is_packed_type(static_cast<uint32_t>(info.type))) return std::nullopt;
  if (!slice.is_whole() && (slice.start < 0 || slice.length < 0 || slice.dim > 1 ||
                            slice.start + slice.length > shape[static_cast<size_t>(slice.dim)])) {
    throw LoadError(file_.path() + ": tensor '" + name + "' of shape " + shape_string(shape) + ": slice dim " +
                    std::to_string(slice.dim) + " [" + std::to_string(slice.start) + ", +" +
                    std::to_string(slice.length) + ") is out of range");
  }
  kernels::PackedMatrix m;
  m.type = static_cast<kernels::PackedType>(info.type);
  m.rows = info.rows();
  m.cols = shape[1];
  m.data = file_.tensor_data(info);
  m.row_stride = static_cast<int64_t>(info.row_bytes());
  m.owner = file_.mapping();
  if (e.expert >= 0) m = m.narrow_rows(e.expert * shape[0], shape[0]);  // one expert of the stack
  if (e.permuted_heads > 0) {
    // Within a head, GGUF row 2j + t holds Hugging Face row t * head_dim / 2 + j
    // (qk_permutation.h).
    const int64_t head_dim = m.rows / e.permuted_heads, half = head_dim / 2;
    std::vector<int64_t> index(static_cast<size_t>(m.rows));
    for (int64_t h = 0; h < e.permuted_heads; ++h)
      for (int64_t t = 0; t < 2; ++t)
        for (int64_t j = 0; j < half; ++j)
          index[static_cast<size_t>(h * head_dim + t * half + j)] = h * head_dim + 2 * j + t;
    m = m.select_rows(index);
  }
  if (slice.is_whole()) return m;
  if (slice.dim == 0) return m.narrow_rows(slice.start, slice.length);
  const int64_t block = kernels::packed_traits(m.type).block_size;
  if (slice.start % block != 0 || slice.length % block != 0) return std::nullopt;
  return m.narrow_cols(slice.start, slice.length);
}

}  // namespace nnsight
