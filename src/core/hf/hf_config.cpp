#include "core/hf/hf_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include <nnsight/error.hpp>

#include "core/hf/hf_config_fields.h"
#include "core/hf/hf_layer_types.h"
#include "core/hf/hf_rope_parameters.h"
#include "core/untrusted_json.h"

namespace nnsight {
namespace {

using nlohmann::json;

// Keys of every Hugging Face config that do not change a forward pass
// (training, generation defaults, bookkeeping).
const std::set<std::string>& harmless_keys() {
  static const std::set<std::string> k = {"_name_or_path",
                                          "architectures",
                                          "model_type",
                                          "torch_dtype",
                                          "dtype",
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

const char* kSupportedModelTypes =
    "llama, mistral, qwen2, qwen3, qwen3_moe, gemma, gemma2, gemma3_text, gemma3 (its text model), gpt_neox, olmo2, "
    "olmo3, phi3, mixtral, smollm3, gpt2";

// A field that transformers 5.x writes at its default value: accepted at
// that value (or null), refused at any other.
void accept_only_default(TrackedHfConfigFields& f, const std::string& key, bool fallback, const std::string& owner,
                         const char* why) {
  if (f.boolean(key, fallback) != fallback) {
    throw LoadError(f.what() + ": field '" + key + "' = " + (fallback ? "false" : "true") + " is not implemented for " +
                    owner + " (" + why + "); only " + (fallback ? "true" : "false") + " or null");
  }
}

// The Llama-style fields most rotary models share (the rotary ones: read_hf_rope).
void read_llama_like(TrackedHfConfigFields& f, ModelConfig& c, double eps_default) {
  c.vocab_size = f.integer("vocab_size");
  c.hidden_size = f.integer("hidden_size");
  c.intermediate_size = f.integer("intermediate_size");
  c.num_layers = f.integer("num_hidden_layers");
  c.num_heads = f.integer("num_attention_heads");
  c.num_kv_heads = f.integer("num_key_value_heads", c.num_heads);
  c.head_dim = f.integer("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.max_position = f.integer("max_position_embeddings", c.max_position);
  c.norm_eps = f.number("rms_norm_eps", eps_default);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.attention_bias = f.boolean("attention_bias", false);
  c.hidden_act = f.string("hidden_act", "silu");
  c.bos_token_id = f.token_id("bos_token_id", -1);
  c.eos_token_id = f.token_id("eos_token_id", -1);
}

// Applies the rope settings every layer shares; the rotary dimension when
// the fraction is below 1.
void set_rope(ModelConfig& c, const HfRope& r) {
  c.rope_theta = r.theta;
  c.rope_scaling = r.scaling;
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * r.partial_rotary_factor);
  if (c.rotary_dim == c.head_dim) c.rotary_dim = 0;
  if (c.rope_scaling.type == "llama3") {
    c.rope_scaling.original_max_position = r.original_max_position.value_or(c.max_position);
  }
  finish_yarn(c.rope_scaling, r, c.max_position);
}

// Qwen2/Qwen3: the window applies only when use_sliding_window is true,
// to layers from max_window_layers on; not implemented, so an error.
void reject_qwen_window(TrackedHfConfigFields& f, const std::string& what) {
  f.mark("sliding_window");
  f.mark("max_window_layers");
  if (f.boolean("use_sliding_window", false)) {
    throw LoadError(what +
                    ": field 'use_sliding_window' = true is not implemented (Qwen's per-layer "
                    "sliding window); only use_sliding_window = false is supported");
  }
}

// SmolLM3: Llama's layer, tied head by default, and no rotary embedding on
// the layers no_rope_layers marks 0 (by default every
// no_rope_layer_interval-th).
void read_smollm3(TrackedHfConfigFields& f, ModelConfig& c) {
  const std::string& what = f.what();
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  const int64_t interval = f.integer("no_rope_layer_interval", 4);
  if (interval <= 0) throw LoadError(what + ": field 'no_rope_layer_interval' must be positive");
  c.nope_layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), false);
  for (int64_t i = 0; i < c.num_layers; ++i) c.nope_layers[static_cast<size_t>(i)] = (i + 1) % interval == 0;
  f.use("no_rope_layers", [&] {
    const json* v = f.get("no_rope_layers");
    if (v == nullptr || v->is_null()) return 0;
    if (!v->is_array() || static_cast<int64_t>(v->size()) != c.num_layers) {
      throw LoadError(what + ": field 'no_rope_layers' = " + shown_json(*v) + ", expected a list of " +
                      std::to_string(c.num_layers) + " entries (one per layer: 1 rope, 0 none)");
    }
    for (size_t i = 0; i < v->size(); ++i) {
      const json& x = (*v)[i];
      if (!x.is_number_integer() || (x.get<int64_t>() != 0 && x.get<int64_t>() != 1)) {
        throw LoadError(what + ": field 'no_rope_layers[" + std::to_string(i) + "]' = " + shown_json(x) +
                        ", expected 1 (rope) or 0 (none)");
      }
      c.nope_layers[i] = x.get<int64_t>() == 0;
    }
    return 0;
  });
}

// OLMo 3: OLMo 2's layer with a sliding window on the layers layer_types
// names (by default all but every 4th) and a rope per layer type: the
// full-attention layers' may scale (YaRN, the long-context checkpoints), the
// sliding ones' does not.
void read_olmo3(TrackedHfConfigFields& f, ModelConfig& c, const std::string& owner) {
  const std::string& what = f.what();
  constexpr double kDefaultTheta = 500000.0;  // Olmo3Config.default_theta
  HfRopeRules full;
  full.scaling_types = {"yarn"};
  full.default_theta = kDefaultTheta;
  full.layer_type = "full_attention";
  set_rope(c, read_hf_rope(f, owner, full));
  HfRopeRules local;
  local.layer_type = "sliding_attention";
  local.default_theta = kDefaultTheta;
  local.v4_scaling = false;
  c.rope_local_theta = read_hf_rope(f, owner, local).theta;
  // transformers 5.x gives a 4.x-spelled rope_theta to the full-attention
  // layers only, its default to the sliding ones: refuse what it would read
  // differently from the config's plain meaning.
  const json* p = f.get("rope_parameters");
  const bool local_theta_given = p != nullptr && p->is_object() && p->contains("sliding_attention") &&
                                 (*p)["sliding_attention"].is_object() &&
                                 (*p)["sliding_attention"].contains("rope_theta");
  if (!local_theta_given && f.has("rope_theta") && c.rope_local_theta != kDefaultTheta) {
    throw LoadError(what + ": field 'rope_theta' = " + json(c.rope_local_theta).dump() + " is not implemented for " +
                    owner +
                    " without 'rope_parameters.sliding_attention.rope_theta': transformers 5.x applies it to the "
                    "full-attention layers only and 500000 to the sliding ones; give each layer type's rope_theta");
  }
  // Absent: 4096; null: none, which transformers cannot build a sliding layer
  // without, so only layer_types with no sliding layer may go with it.
  const json* w = f.get("sliding_window");
  const bool null_window = w == nullptr && f.object().contains("sliding_window");
  c.sliding_window = null_window ? 0 : w == nullptr ? 4096 : f.integer("sliding_window");
  f.mark("sliding_window");
  if (c.sliding_window <= 0 && !f.has("layer_types")) {
    throw LoadError(what + ": field 'sliding_window' = " + (w == nullptr ? std::string("null") : shown_json(*w)) +
                    " leaves OLMo 3's sliding layers (every layer but each 4th, as no 'layer_types' is given) "
                    "without a window");
  }
  c.sliding_layers.resize(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)));
  for (int64_t i = 0; i < c.num_layers; ++i) c.sliding_layers[static_cast<size_t>(i)] = (i + 1) % 4 != 0;
}

// transformers 5.x's `layer_types`. For Gemma 2 and 3 (`per_layer`) it says
// which layers slide, and must agree with sliding_window_pattern when that is
// given too; for every other model type it must say what the engine computes
// from the other fields (Mistral: every layer slides; Qwen: none), since
// other patterns are not implemented there.
void apply_layer_types(TrackedHfConfigFields& f, ModelConfig& c, bool per_layer, bool pattern_given,
                       const std::string& owner) {
  const auto given = read_hf_layer_types(f, c.num_layers, owner);
  if (!given) return;
  std::vector<bool> engine(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) engine[static_cast<size_t>(i)] = c.layer_slides(i);
  if (per_layer && !pattern_given) {
    c.sliding_layers = *given;
  } else if (*given != engine) {
    if (pattern_given) {
      throw LoadError(f.what() +
                      ": fields 'sliding_window_pattern' = " + std::to_string(f.integer("sliding_window_pattern")) +
                      " and 'layer_types' = " + describe_layer_types(*given) +
                      " disagree (two spellings of one setting must say the same)");
    }
    size_t i = 0;
    while ((*given)[i] == engine[i]) ++i;
    throw LoadError(f.what() + ": field 'layer_types' = " + describe_layer_types(*given) + " is not implemented for " +
                    owner + ": layer " + std::to_string(i) + " is " +
                    ((*given)[i] ? "sliding_attention, but the engine implements only full attention there"
                                 : "full_attention, but the engine implements only the sliding window there"));
  }
  if (per_layer && c.sliding_window <= 0) {
    for (bool s : c.sliding_layers) {
      if (s) throw LoadError(f.what() + ": field 'layer_types' has sliding layers but 'sliding_window' is not set");
    }
  }
}

ModelConfig config_from_json(const json& j, const std::string& what);

// Gemma3TextConfig's defaults (transformers 4.50 through 5.x) for the fields
// a multimodal checkpoint's text_config leaves out: the hub's Gemma 3 4B/12B/
// 27B configs give only the fields that differ from them.
json gemma3_text_defaults() {
  return json{{"model_type", "gemma3_text"},
              {"vocab_size", 262208},
              {"hidden_size", 2304},
              {"intermediate_size", 9216},
              {"num_hidden_layers", 26},
              {"num_attention_heads", 8},
              {"num_key_value_heads", 4},
              {"head_dim", 256},
              {"hidden_activation", "gelu_pytorch_tanh"},
              {"max_position_embeddings", 131072},
              {"rms_norm_eps", 1e-6},
              {"query_pre_attn_scalar", 256},
              {"sliding_window", 4096},
              {"tie_word_embeddings", true},
              {"bos_token_id", 2},
              {"eos_token_id", 1},
              {"pad_token_id", 0}};
}

// model_type 'gemma3' (Gemma3ForConditionalGeneration): the engine serves
// the text model its text_config describes (over Gemma3TextConfig's
// defaults); the vision tower and projector are not built, so prompts are
// text (an image token's id is embedded as the token it is). The wrapper's
// own fields must agree with the text model's where both say something.
ModelConfig gemma3_multimodal(TrackedHfConfigFields& f, const std::string& what) {
  const json* text = f.get("text_config");
  if (text == nullptr || !text->is_object())
    throw LoadError(what + ": model_type 'gemma3' needs a 'text_config' object (its language model)");
  f.mark("text_config");
  json t = gemma3_text_defaults();
  const bool text_has_type = text->contains("model_type") && !(*text)["model_type"].is_null();
  for (auto it = text->begin(); it != text->end(); ++it) t[it.key()] = it.value();
  if (text_has_type && t["model_type"] != "gemma3_text")
    throw LoadError(what + ": field 'text_config.model_type' = " + shown_json(t["model_type"]) +
                    " is not supported for model_type 'gemma3' (only gemma3_text)");
  // Token ids the hub configs give on the wrapper only ("eos_token_id": [1, 106]).
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    const json* outer = f.get(key);
    if (outer != nullptr && (!text->contains(key) || (*text)[key].is_null())) t[key] = *outer;
  }
  if (const json* tie = f.get("tie_word_embeddings"); tie != nullptr) {
    f.mark("tie_word_embeddings");
    if (!tie->is_boolean()) throw f.type_error("tie_word_embeddings", *tie, "a boolean");
    if (text->contains("tie_word_embeddings") && !(*text)["tie_word_embeddings"].is_null() &&
        (*text)["tie_word_embeddings"] != *tie)
      throw LoadError(what + ": fields 'tie_word_embeddings' = " + shown_json(*tie) +
                      " and 'text_config.tie_word_embeddings' = " + shown_json((*text)["tie_word_embeddings"]) +
                      " disagree (two spellings of one setting must say the same)");
    t["tie_word_embeddings"] = *tie;
  }
  // The image side: its tower, projector and special tokens only act on images.
  for (const char* key : {"vision_config", "mm_tokens_per_image", "boi_token_index", "eoi_token_index",
                          "image_token_index", "image_token_id", "boi_token_id", "eoi_token_id"})
    f.mark(key);
  f.reject_unused("model_type 'gemma3'", harmless_keys());
  ModelConfig c = config_from_json(t, what + " (text_config)");
  c.multimodal = "gemma3";
  if (const auto name = f.maybe_string("_name_or_path"); name && !name->empty()) c.name = *name;
  return c;
}

ModelConfig config_from_json(const json& j, const std::string& what) {
  if (!j.is_object()) throw LoadError(what + ": not a JSON object");
  TrackedHfConfigFields f(j, what);
  const std::string model_type = f.string("model_type", "");
  const std::string owner = "model_type '" + model_type + "'";
  // transformers 5.x writes `dtype` where 4.x wrote `torch_dtype`; neither changes the forward pass.
  if (f.has("torch_dtype") && f.has("dtype") && f.get("torch_dtype")->is_string() && f.get("dtype")->is_string()) {
    agreed_value<std::string>(what,
                              {{"torch_dtype", f.maybe_string("torch_dtype")}, {"dtype", f.maybe_string("dtype")}});
  }
  if (model_type == "gemma3") return gemma3_multimodal(f, what);
  ModelConfig c;
  c.name = f.string("_name_or_path", "");
  bool per_layer_types = false, pattern_given = false;
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "qwen3" ||
      model_type == "qwen3_moe" || model_type == "olmo2" || model_type == "olmo3" || model_type == "mixtral" ||
      model_type == "smollm3") {
    const bool llama =
        model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "smollm3";
    c.architecture = llama ? "llama" : model_type == "olmo3" ? "olmo2" : model_type;
    c.model_type = model_type;
    // transformers' defaults: 1e-5 for Mixtral and OLMo 2/3, 1e-6 for the others.
    read_llama_like(f, c, model_type == "mixtral" || model_type == "olmo2" || model_type == "olmo3" ? 1e-5 : 1e-6);
    HfRopeRules rope;
    if (model_type == "llama") rope.scaling_types = {"llama3"};
    if (model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe" || model_type == "smollm3")
      rope.scaling_types = {"yarn"};
    if (model_type == "mixtral") rope.default_theta = 1e6;
    if (model_type == "smollm3") {
      rope.default_theta = 2e6;
      read_smollm3(f, c);
    }
    if (model_type == "olmo3") {
      read_olmo3(f, c, owner);
      per_layer_types = true;
    } else {
      set_rope(c, read_hf_rope(f, owner, rope));
    }
    // Qwen2 always has q/k/v biases and no o_proj bias; its config has no flag.
    if (model_type == "qwen2") {
      c.attention_bias = true;
      c.attention_out_bias = false;
    }
    if (model_type == "llama" || model_type == "smollm3") c.mlp_bias = f.boolean("mlp_bias", false);
    if (model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe" || model_type == "smollm3")
      reject_qwen_window(f, what);
    if (model_type == "qwen2" && f.boolean("use_mrope", false)) {
      throw LoadError(what + ": field 'use_mrope' = true (multimodal rotary) is not implemented");
    }
    if (model_type == "qwen3_moe") {
      // transformers 5.x writes num_experts as num_local_experts (Mixtral's name).
      c.num_experts = agreed_value<int64_t>(what, {{"num_experts", f.maybe_integer("num_experts")},
                                                   {"num_local_experts", f.maybe_integer("num_local_experts")}})
                          .value_or(128);
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
    // Gemma's MLP reads hidden_act, Gemma 2 and 3 read hidden_activation (transformers 4.51 and 5.x).
    if (model_type == "gemma") {
      c.hidden_act = f.string("hidden_act", "gelu_pytorch_tanh");
      f.mark("hidden_activation");
    } else {
      c.hidden_act = f.string("hidden_activation", "gelu_pytorch_tanh");
      f.mark("hidden_act");
    }
    // transformers 5.x writes it (null or false); true is an encoder's mask.
    accept_only_default(f, "use_bidirectional_attention", false, owner, "bidirectional attention");
    if (model_type == "gemma3_text") {
      // 4.x: rope_theta, rope_scaling (global layers only), rope_local_base_freq;
      // 5.x: rope_parameters.full_attention / .sliding_attention.
      HfRopeRules global;
      global.scaling_types = {"linear"};
      global.default_theta = 1e6;
      global.layer_type = "full_attention";
      set_rope(c, read_hf_rope(f, owner, global));
      HfRopeRules local;
      local.layer_type = "sliding_attention";
      local.theta_keys = {"rope_local_base_freq"};
      local.partial_keys = {};
      local.v4_scaling = false;
      c.rope_local_theta = read_hf_rope(f, owner, local).theta;
    } else {
      set_rope(c, read_hf_rope(f, owner, HfRopeRules{}));
    }
    if (model_type != "gemma") {
      c.query_pre_attn_scalar = f.number("query_pre_attn_scalar", 256);
      c.sliding_window = f.integer("sliding_window", 4096);
      const bool g2 = model_type == "gemma2";
      c.attn_logit_softcap = f.number("attn_logit_softcapping", g2 ? 50.0 : 0.0);
      if (!g2 && c.attn_logit_softcap != 0.0) {
        // transformers' Gemma 3 (4.51, 5.x) never passes it to its attention: refuse rather than guess.
        throw LoadError(what +
                        ": field 'attn_logit_softcapping' is set, but Gemma 3 as transformers implements "
                        "it does not apply an attention soft-cap; only null is supported for gemma3_text");
      }
      c.final_logit_softcap = f.number("final_logit_softcapping", g2 ? 30.0 : 0.0);
      pattern_given = !g2 && f.has("sliding_window_pattern");
      const int64_t pattern = g2 ? 2 : f.integer("sliding_window_pattern", 6);
      if (pattern <= 0) throw LoadError(what + ": field 'sliding_window_pattern' must be positive");
      c.sliding_layers.resize(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)));
      for (int64_t i = 0; i < c.num_layers; ++i) {
        // Gemma 2: even layers slide; Gemma 3: all but every pattern-th (unless layer_types says otherwise).
        c.sliding_layers[static_cast<size_t>(i)] = g2 ? i % 2 == 0 : (i + 1) % pattern != 0;
      }
      per_layer_types = true;
    }
  } else if (model_type == "phi3") {
    c.architecture = "phi3";
    read_llama_like(f, c, 1e-5);
    if (c.attention_bias) throw LoadError(what + ": field 'attention_bias' = true is not implemented for phi3");
    HfRopeRules rules;
    rules.scaling_types = {"longrope"};
    rules.partial_rotary = true;
    const HfRope rope = read_hf_rope(f, owner, rules);
    set_rope(c, rope);
    // transformers 5.x writes it at the top level and inside rope_parameters.
    const int64_t original =
        agreed_value<int64_t>(
            what, {{"original_max_position_embeddings", f.maybe_integer("original_max_position_embeddings")},
                   {rope.scaling_path + ".original_max_position_embeddings", rope.original_max_position}})
            .value_or(c.max_position);
    if (c.rope_scaling.type == "longrope") {
      RopeScaling& r = c.rope_scaling;
      r.original_max_position = original;
      const int64_t half = (c.rotary_dim > 0 ? c.rotary_dim : c.head_dim) / 2;
      if (static_cast<int64_t>(r.short_factor.size()) != half || static_cast<int64_t>(r.long_factor.size()) != half) {
        throw LoadError(what + ": rope short_factor/long_factor must have " + std::to_string(half) +
                        " entries (rotary dimension / 2)");
      }
      // The attention factor derives from the context ratio (transformers: from `factor` when
      // the rope dict gives one, 4.51's Phi-3 always from the ratio): only a factor equal to it is accepted.
      const double ratio = static_cast<double>(c.max_position) / static_cast<double>(original);
      if (r.factor != 0.0 && r.factor != ratio) {
        throw LoadError(what + ": field '" + rope.scaling_path + ".factor' = " + json(r.factor).dump() +
                        " is not implemented for phi3: only max_position_embeddings / "
                        "original_max_position_embeddings = " +
                        json(ratio).dump() +
                        " (transformers 4.51 and 5.x derive the attention factor differently otherwise)");
      }
      if (r.attention_factor == 0.0) {
        r.attention_factor =
            ratio <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(ratio) / std::log(static_cast<double>(original)));
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
    // 4.x writes rotary_pct / rotary_emb_base and (4.4x+) partial_rotary_factor / rope_theta;
    // 5.x rope_parameters. Every spelling present must agree.
    HfRopeRules rules;
    rules.partial_rotary = true;
    rules.default_partial = 0.25;
    rules.theta_keys = {"rotary_emb_base", "rope_theta"};
    rules.partial_keys = {"rotary_pct", "partial_rotary_factor"};
    set_rope(c, read_hf_rope(f, owner, rules));
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
  apply_layer_types(f, c, per_layer_types, pattern_given, owner);
  // An eos list ("eos_token_id": [128001, 128008, 128009]): the first is
  // eos_token_id (read above), every one ends a sequence.
  if (const json* eos = f.get("eos_token_id"); eos != nullptr && eos->is_array())
    for (const json& id : *eos) {
      if (!id.is_number_integer() || (id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX) ||
          id.get<int64_t>() < 0)
        throw f.type_error("eos_token_id", *eos, "a token id or a list of token ids");
      c.add_eos_token_id(id.get<int64_t>());
    }
  f.reject_unused(owner, harmless_keys());
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
