#include "core/hf/hf_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include <nnsight/error.hpp>

#include "core/untrusted_json.h"

namespace nnsight {
namespace {

using nlohmann::json;

// Typed field access where a missing field or an explicit null means "use the default".
class Fields {
 public:
  Fields(const json& j, std::string what) : j_(j), what_(std::move(what)) {}

  const json* get(const std::string& key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const std::string& key) const { return get(key) != nullptr; }

  int64_t integer(const std::string& key) const {
    const json* v = get(key);
    if (v == nullptr) throw LoadError(what_ + ": missing field '" + key + "'");
    return to_int(*v, key);
  }
  int64_t integer(const std::string& key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const std::string& key, double fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) throw error(key, *v, "a number");
    return v->get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) throw error(key, *v, "true or false");
    return v->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) throw error(key, *v, "a string");
    return v->get<std::string>();
  }
  // A token id given as an integer or a list of integers (the first is used).
  int64_t token_id(const std::string& key, int64_t fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (v->is_array()) {
      if (v->empty()) return fallback;
      return to_int((*v)[0], key);
    }
    return to_int(*v, key);
  }

 private:
  int64_t to_int(const json& v, const std::string& key) const {
    if (!v.is_number_integer()) throw error(key, v, "an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw error(key, v, "an integer that fits in 64 bits");
    }
    return v.get<int64_t>();
  }
  LoadError error(const std::string& key, const json& v, const char* expected) const {
    std::string shown = v.dump();
    if (shown.size() > 60) shown = shown.substr(0, 60) + "...";
    return LoadError(what_ + ": field '" + key + "' = " + shown + ", expected " + expected);
  }

  const json& j_;
  std::string what_;
};

// Keys of every Hugging Face config that do not change a forward pass
// (training, generation defaults, bookkeeping).
const std::set<std::string>& harmless_keys() {
  static const std::set<std::string> k = {"_name_or_path",
                                          "architectures",
                                          "model_type",
                                          "torch_dtype",
                                          "transformers_version",
                                          "use_cache",
                                          "initializer_range",
                                          "pad_token_id",
                                          "bos_token_id",
                                          "eos_token_id",
                                          "sep_token_id",
                                          "decoder_start_token_id",
                                          "attention_dropout",
                                          "hidden_dropout",
                                          "classifier_dropout",
                                          "resid_pdrop",
                                          "embd_pdrop",
                                          "attn_pdrop",
                                          "output_attentions",
                                          "output_hidden_states",
                                          "return_dict",
                                          "id2label",
                                          "label2id",
                                          "is_decoder",
                                          "is_encoder_decoder",
                                          "add_cross_attention",
                                          "tie_encoder_decoder",
                                          "torchscript",
                                          "pruned_heads",
                                          "chunk_size_feed_forward",
                                          "problem_type",
                                          "tokenizer_class",
                                          "prefix",
                                          "task_specific_params",
                                          "finetuning_task",
                                          "cross_attention_hidden_size",
                                          "use_bfloat16",
                                          "tf_legacy_loss",
                                          "bad_words_ids",
                                          "begin_suppress_tokens",
                                          "diversity_penalty",
                                          "do_sample",
                                          "early_stopping",
                                          "encoder_no_repeat_ngram_size",
                                          "exponential_decay_length_penalty",
                                          "forced_bos_token_id",
                                          "forced_eos_token_id",
                                          "length_penalty",
                                          "max_length",
                                          "min_length",
                                          "no_repeat_ngram_size",
                                          "num_beam_groups",
                                          "num_beams",
                                          "num_return_sequences",
                                          "output_scores",
                                          "remove_invalid_values",
                                          "repetition_penalty",
                                          "suppress_tokens",
                                          "temperature",
                                          "top_k",
                                          "top_p",
                                          "typical_p",
                                          "return_dict_in_generate",
                                          "cache_implementation",
                                          "output_router_logits",
                                          "router_aux_loss_coef",
                                          "router_jitter_noise",
                                          "pretraining_tp",
                                          "summary_type",
                                          "summary_use_proj",
                                          "summary_activation",
                                          "summary_proj_to_labels",
                                          "summary_first_dropout",
                                          "n_ctx",
                                          "reorder_and_upcast_attn",
                                          "keys_to_ignore_at_inference",
                                          "auto_map",
                                          "attn_implementation",
                                          "transformers.js_config",
                                          "unsloth_version",
                                          "unsloth_fixed"};
  return k;
}

RopeScaling read_rope_scaling(const Fields& f, const std::string& what, const std::set<std::string>& allowed) {
  const json* rs = f.get("rope_scaling");
  if (rs == nullptr) return {};
  if (!rs->is_object()) throw LoadError(what + ": field 'rope_scaling' is not an object");
  Fields r(*rs, what + ": rope_scaling");
  const std::string type = r.string("rope_type", r.string("type", "default"));
  if (type == "default") return {};
  if (allowed.count(type) == 0) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    throw LoadError(what + ": rope_scaling type '" + type + "' is not supported for this model_type (" +
                    (list.empty() ? "none" : list) + ")");
  }
  RopeScaling s;
  s.type = type;
  if (type == "longrope") {
    auto factors = [&](const char* key) {
      const json* v = r.get(key);
      if (v == nullptr || !v->is_array()) throw LoadError(what + ": rope_scaling." + key + " is not a list");
      std::vector<double> out;
      for (const auto& x : *v) {
        if (!x.is_number()) throw LoadError(what + ": rope_scaling." + key + " holds a non-number");
        out.push_back(x.get<double>());
      }
      return out;
    };
    s.short_factor = factors("short_factor");
    s.long_factor = factors("long_factor");
    s.attention_factor = r.number("attention_factor", 0.0);
    return s;
  }
  s.factor = r.number("factor", 0.0);
  if (!(s.factor > 0.0)) throw LoadError(what + ": rope_scaling.factor must be positive");
  if (type == "llama3") {
    s.low_freq_factor = r.number("low_freq_factor", s.low_freq_factor);
    s.high_freq_factor = r.number("high_freq_factor", s.high_freq_factor);
    s.original_max_position = r.integer("original_max_position_embeddings", s.original_max_position);
  }
  return s;
}

// Fields access that remembers which keys were read, so that a key the
// engine does not implement is reported instead of silently ignored.
class TrackedFields : public Fields {
 public:
  TrackedFields(const json& j, const std::string& what) : Fields(j, what), j_(j) {}
  template <class F>
  auto use(const std::string& key, F&& read) -> decltype(read()) {
    used_.insert(key);
    return read();
  }
  int64_t integer(const std::string& key) {
    return use(key, [&] { return Fields::integer(key); });
  }
  int64_t integer(const std::string& key, int64_t fb) {
    return use(key, [&] { return Fields::integer(key, fb); });
  }
  double number(const std::string& key, double fb) {
    return use(key, [&] { return Fields::number(key, fb); });
  }
  bool boolean(const std::string& key, bool fb) {
    return use(key, [&] { return Fields::boolean(key, fb); });
  }
  std::string string(const std::string& key, const std::string& fb) {
    return use(key, [&] { return Fields::string(key, fb); });
  }
  int64_t token_id(const std::string& key, int64_t fb) {
    return use(key, [&] { return Fields::token_id(key, fb); });
  }
  void mark(const std::string& key) { used_.insert(key); }
  // Throws LoadError naming the first key that is set (not null) and was never read.
  void reject_unused(const std::string& what, const std::string& model_type) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      // Keys starting with '_' are bookkeeping (_name_or_path, _attn_implementation_autoset, ...).
      if (it->is_null() || used_.count(it.key()) || harmless_keys().count(it.key()) || it.key()[0] == '_') continue;
      std::string shown = it->dump();
      if (shown.size() > 60) shown = shown.substr(0, 60) + "...";
      throw LoadError(what + ": field '" + it.key() + "' = " + shown + " is not implemented for model_type '" +
                      model_type + "' (the engine would compute something else than the checkpoint expects)");
    }
  }

 private:
  const json& j_;
  std::set<std::string> used_;
};

const char* kSupportedModelTypes =
    "llama, mistral, qwen2, qwen3, qwen3_moe, gemma, gemma2, gemma3_text, gpt_neox, olmo2, phi3, mixtral, gpt2";

// The Llama-style fields most rotary models share.
void read_llama_like(TrackedFields& f, ModelConfig& c, double eps_default) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer("num_key_value_heads", c.num_heads);
  c.head_dim = f.integer("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_position = f.integer("max_position_embeddings", c.max_position);
  c.norm_eps = f.number("rms_norm_eps", eps_default);
  c.rope_theta = f.number("rope_theta", 10000.0);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.attention_bias = f.boolean("attention_bias", false);
  c.hidden_act = f.string("hidden_act", "silu");
  c.bos_token_id = f.token_id("bos_token_id", -1);
  c.eos_token_id = f.token_id("eos_token_id", -1);
}

// Qwen2/Qwen3: the window applies only when use_sliding_window is true,
// to layers from max_window_layers on; not implemented, so an error.
void reject_qwen_window(TrackedFields& f, const std::string& what) {
  f.mark("sliding_window");
  f.mark("max_window_layers");
  if (f.boolean("use_sliding_window", false)) {
    throw LoadError(what +
                    ": field 'use_sliding_window' = true is not implemented (Qwen's per-layer "
                    "sliding window); only use_sliding_window = false is supported");
  }
}

ModelConfig config_from_json(const json& j, const std::string& what) {
  if (!j.is_object()) throw LoadError(what + ": not a JSON object");
  TrackedFields f(j, what);
  const std::string model_type = f.string("model_type", "");
  ModelConfig c;
  c.name = f.string("_name_or_path", "");
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "qwen3" ||
      model_type == "qwen3_moe" || model_type == "olmo2" || model_type == "mixtral") {
    c.architecture = model_type == "llama" || model_type == "mistral" || model_type == "qwen2" ? "llama" : model_type;
    read_llama_like(f, c, model_type == "mixtral" ? 1e-5 : 1e-6);
    c.rope_scaling = f.use("rope_scaling", [&] {
      return read_rope_scaling(f, what,
                               model_type == "llama" ? std::set<std::string>{"llama3"} : std::set<std::string>{});
    });
    // Qwen2 always has q/k/v biases (and no o_proj bias); its config has no flag.
    if (model_type == "qwen2") c.attention_bias = true;
    if (model_type == "llama") c.mlp_bias = f.boolean("mlp_bias", false);
    if (model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe") reject_qwen_window(f, what);
    if (model_type == "qwen2" && f.boolean("use_mrope", false)) {
      throw LoadError(what + ": field 'use_mrope' = true (multimodal rotary) is not implemented");
    }
    if (model_type == "qwen3_moe") {
      c.num_experts = f.integer("num_experts", 128);
      c.num_experts_per_token = f.integer("num_experts_per_tok", 8);
      c.moe_intermediate_size = f.integer("moe_intermediate_size", 768);
      c.norm_topk_prob = f.boolean("norm_topk_prob", false);
      const int64_t step = f.integer("decoder_sparse_step", 1);
      if (step <= 0) throw LoadError(what + ": field 'decoder_sparse_step' must be positive");
      std::vector<int64_t> dense;
      f.use("mlp_only_layers", [&] {
        if (const json* v = f.get("mlp_only_layers")) {
          if (!v->is_array()) throw LoadError(what + ": field 'mlp_only_layers' is not a list");
          for (const auto& x : *v) {
            if (!x.is_number_integer()) throw LoadError(what + ": field 'mlp_only_layers' holds a non-integer");
            dense.push_back(x.get<int64_t>());
          }
        }
        return 0;
      });
      // A layer is sparse unless listed in mlp_only_layers, and only every decoder_sparse_step-th.
      c.moe_layers.resize(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)));
      for (int64_t i = 0; i < c.num_layers; ++i) {
        const bool listed = std::find(dense.begin(), dense.end(), i) != dense.end();
        c.moe_layers[static_cast<size_t>(i)] = !listed && c.num_experts > 0 && (i + 1) % step == 0;
      }
    }
    // Mistral and Mixtral: every layer attends through the window (null: none).
    if (model_type == "mistral" || model_type == "mixtral") c.sliding_window = f.integer("sliding_window", 0);
    if (model_type == "mixtral") {
      c.num_experts = f.integer("num_local_experts", 8);
      c.num_experts_per_token = f.integer("num_experts_per_tok", 2);
    }
  } else if (model_type == "gemma" || model_type == "gemma2" || model_type == "gemma3_text") {
    c.architecture = model_type;
    read_llama_like(f, c, 1e-6);
    c.head_dim = f.integer("head_dim", 256);
    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
    // Gemma's MLP reads hidden_act, Gemma 2 and 3 read hidden_activation (transformers 4.51).
    if (model_type == "gemma") {
      c.hidden_act = f.string("hidden_act", "gelu_pytorch_tanh");
      f.mark("hidden_activation");
    } else {
      c.hidden_act = f.string("hidden_activation", "gelu_pytorch_tanh");
      f.mark("hidden_act");
    }
    c.rope_scaling = f.use("rope_scaling", [&] {
      return read_rope_scaling(f, what,
                               model_type == "gemma3_text" ? std::set<std::string>{"linear"} : std::set<std::string>{});
    });
    if (model_type != "gemma") {
      c.query_pre_attn_scalar = f.number("query_pre_attn_scalar", 256);
      c.sliding_window = f.integer("sliding_window", 4096);
      const bool g2 = model_type == "gemma2";
      c.attn_logit_softcap = f.number("attn_logit_softcapping", g2 ? 50.0 : 0.0);
      if (!g2 && c.attn_logit_softcap != 0.0) {
        // transformers' Gemma 3 (4.51) never passes it to its attention: refuse rather than guess.
        throw LoadError(what +
                        ": field 'attn_logit_softcapping' is set, but Gemma 3 as transformers implements "
                        "it does not apply an attention soft-cap; only null is supported for gemma3_text");
      }
      c.final_logit_softcap = f.number("final_logit_softcapping", g2 ? 30.0 : 0.0);
      const int64_t pattern = g2 ? 2 : f.integer("sliding_window_pattern", 6);
      if (pattern <= 0) throw LoadError(what + ": field 'sliding_window_pattern' must be positive");
      c.sliding_layers.resize(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)));
      for (int64_t i = 0; i < c.num_layers; ++i) {
        // Gemma 2: even layers slide; Gemma 3: all but every pattern-th.
        c.sliding_layers[static_cast<size_t>(i)] = g2 ? i % 2 == 0 : (i + 1) % pattern != 0;
      }
      if (!g2) c.rope_local_theta = f.number("rope_local_base_freq", 10000.0);
    }
  } else if (model_type == "phi3") {
    c.architecture = "phi3";
    read_llama_like(f, c, 1e-5);
    if (c.attention_bias) throw LoadError(what + ": field 'attention_bias' = true is not implemented for phi3");
    const double partial = f.number("partial_rotary_factor", 1.0);
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
    if (c.rotary_dim == c.head_dim) c.rotary_dim = 0;
    c.rope_scaling = f.use("rope_scaling", [&] { return read_rope_scaling(f, what, {"longrope"}); });
    const int64_t original = f.integer("original_max_position_embeddings", c.max_position);
    if (c.rope_scaling.type == "longrope") {
      RopeScaling& r = c.rope_scaling;
      r.original_max_position = original;
      const int64_t half = (c.rotary_dim > 0 ? c.rotary_dim : c.head_dim) / 2;
      if (static_cast<int64_t>(r.short_factor.size()) != half || static_cast<int64_t>(r.long_factor.size()) != half) {
        throw LoadError(what + ": rope_scaling short_factor/long_factor must have " + std::to_string(half) +
                        " entries (rotary dimension / 2)");
      }
      if (r.attention_factor == 0.0) {
        const double factor = static_cast<double>(c.max_position) / static_cast<double>(original);
        r.attention_factor =
            factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(original)));
      }
    }
    c.sliding_window = f.integer("sliding_window", 0);
  } else if (model_type == "gpt_neox") {
    c.architecture = "gpt_neox";
    c.vocab_size = f.integer("vocab_size");
    c.hidden_size = f.integer("hidden_size");
    c.intermediate_size = f.integer("intermediate_size");
    c.num_layers = f.integer("num_hidden_layers");
    c.num_heads = f.integer("num_attention_heads");
    c.num_kv_heads = c.num_heads;
    c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
    c.max_position = f.integer("max_position_embeddings", 2048);
    c.norm_eps = f.number("layer_norm_eps", 1e-5);
    // transformers writes both spellings; they must agree.
    const double pct = f.number("rotary_pct", 0.25);
    const double partial = f.number("partial_rotary_factor", pct);
    const double base = f.number("rotary_emb_base", 10000.0);
    c.rope_theta = f.number("rope_theta", base);
    if (partial != pct || c.rope_theta != base) {
      throw LoadError(what + ": rotary_pct/partial_rotary_factor or rotary_emb_base/rope_theta disagree");
    }
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * pct);
    if (c.rotary_dim == c.head_dim) c.rotary_dim = 0;
    c.rope_scaling = f.use("rope_scaling", [&] { return read_rope_scaling(f, what, {}); });
    c.parallel_residual = f.boolean("use_parallel_residual", true);
    c.attention_bias = f.boolean("attention_bias", true);
    c.mlp_bias = true;
    c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
    c.hidden_act = f.string("hidden_act", "gelu");
    c.bos_token_id = f.token_id("bos_token_id", 0);
    c.eos_token_id = f.token_id("eos_token_id", 2);
  } else if (model_type == "gpt2") {
    // Defaults are GPT2Config's.
    c.architecture = "gpt2";
    c.vocab_size = f.integer("vocab_size", 50257);
    c.hidden_size = f.integer("n_embd", 768);
    c.num_layers = f.integer("n_layer", 12);
    c.num_heads = f.integer("n_head", 12);
    c.num_kv_heads = c.num_heads;
    c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
    c.intermediate_size = f.integer("n_inner", 4 * c.hidden_size);
    c.max_position = f.integer("n_positions", 1024);
    c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
    c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
    c.attention_bias = true;
    c.mlp_bias = true;
    c.hidden_act = f.string("activation_function", "gelu_new");
    c.bos_token_id = f.token_id("bos_token_id", 50256);
    c.eos_token_id = f.token_id("eos_token_id", 50256);
    if (!f.boolean("scale_attn_weights", true) || f.boolean("scale_attn_by_inverse_layer_idx", false)) {
      throw LoadError(what +
                      ": GPT-2 attention scaling other than 1/sqrt(head_dim) is not implemented "
                      "(scale_attn_weights / scale_attn_by_inverse_layer_idx)");
    }
  } else {
    throw LoadError(what + ": model_type '" + model_type + "' is not supported (" + kSupportedModelTypes + ")");
  }
  f.reject_unused(what, model_type);
  if (c.name.empty()) c.name = model_type;
  try {
    c.validate();
  } catch (const ConfigError& e) {
    throw LoadError(what + ": " + e.what());
  }
  return c;
}

}  // namespace

ModelConfig parse_hf_config(const std::string& json_text, const std::string& what) {
  return config_from_json(parse_untrusted_json(json_text.data(), json_text.size(), what), what);
}

ModelConfig read_hf_config(const std::string& path) {
  // config.json files are a few KB; 16 MB is generous.
  return config_from_json(read_untrusted_json_file(path, 16u << 20), path);
}

}  // namespace nnsight
