#include "core/hf/hf_config.h"

#include <nlohmann/json.hpp>

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
  int64_t integer(const std::string& key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
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

RopeScaling read_rope_scaling(const Fields& f, const std::string& what) {
  const json* rs = f.get("rope_scaling");
  if (rs == nullptr) return {};
  if (!rs->is_object()) throw LoadError(what + ": field 'rope_scaling' is not an object");
  Fields r(*rs, what + ": rope_scaling");
  const std::string type = r.string("rope_type", r.string("type", "default"));
  if (type == "default") return {};
  if (type != "llama3") {
    throw LoadError(what + ": rope_scaling type '" + type + "' is not supported (only llama3)");
  }
  RopeScaling s;
  s.factor = r.number("factor", 0.0);
  if (!(s.factor > 0.0)) throw LoadError(what + ": rope_scaling.factor must be positive");
  s.low_freq_factor = r.number("low_freq_factor", s.low_freq_factor);
  s.high_freq_factor = r.number("high_freq_factor", s.high_freq_factor);
  s.original_max_position = r.integer("original_max_position_embeddings", s.original_max_position);
  return s;
}

ModelConfig config_from_json(const json& j, const std::string& what) {
  if (!j.is_object()) throw LoadError(what + ": not a JSON object");
  Fields f(j, what);
  const std::string model_type = f.string("model_type", "");
  ModelConfig c;
  c.name = f.string("_name_or_path", "");
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2") {
    c.architecture = "llama";
    c.vocab_size = f.integer("vocab_size");
    c.hidden_size = f.integer("hidden_size");
    c.intermediate_size = f.integer("intermediate_size");
    c.num_layers = f.integer("num_hidden_layers");
    c.num_heads = f.integer("num_attention_heads");
    c.num_kv_heads = f.integer("num_key_value_heads", c.num_heads);
    c.head_dim = f.integer("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
    c.max_position = f.integer("max_position_embeddings", c.max_position);
    c.norm_eps = f.number("rms_norm_eps", 1e-6);
    c.rope_theta = f.number("rope_theta", 10000.0);
    c.rope_scaling = read_rope_scaling(f, what);
    c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
    // Qwen2 always has q/k/v biases (and no o_proj bias); its config has no flag.
    c.attention_bias = model_type == "qwen2" ? true : f.boolean("attention_bias", false);
    c.mlp_bias = f.boolean("mlp_bias", false);
    c.hidden_act = f.string("hidden_act", "silu");
    c.bos_token_id = f.token_id("bos_token_id", -1);
    c.eos_token_id = f.token_id("eos_token_id", -1);
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
  } else {
    throw LoadError(what + ": model_type '" + model_type +
                    "' is not supported (llama, mistral, qwen2, gpt2)");
  }
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
