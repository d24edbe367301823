#include "core/hf/hf_rope_parameters.h"

#include <cmath>

#include <nnsight/error.hpp>

namespace nnsight {
namespace {

using nlohmann::json;

// What one rope dict says: rope_scaling (4.x), rope_parameters (5.x) or one
// of its per-layer-type dicts.
struct RopeDict {
  std::string path;  // "rope_parameters", "rope_parameters.full_attention", "rope_scaling"
  std::string type = "default";
  std::optional<double> theta, partial;
  std::optional<int64_t> original_max_position;
  std::optional<double> mscale, mscale_all_dim;  // yarn
  RopeScaling scaling;
};

std::string list(const std::set<std::string>& types) {
  std::string out = "default";
  for (const auto& t : types) out += ", " + t;
  return out;
}

std::vector<double> factor_list(TrackedHfConfigFields& r, const std::string& key) {
  return r.use(key, [&] {
    const json* v = r.get(key);
    if (v == nullptr) throw LoadError(r.what() + ": missing field '" + r.path(key) + "'");
    if (!v->is_array()) throw r.type_error(key, *v, "a list of numbers");
    std::vector<double> out;
    for (const auto& x : *v) {
      if (!x.is_number()) throw r.type_error(key, *v, "a list of numbers");
      out.push_back(x.get<double>());
    }
    return out;
  });
}

double positive(TrackedHfConfigFields& r, const std::string& key) {
  const std::optional<double> v = r.maybe_number(key);
  if (!v) throw LoadError(r.what() + ": missing field '" + r.path(key) + "'");
  if (!(*v > 0.0)) throw LoadError(r.what() + ": field '" + r.path(key) + "' must be positive");
  return *v;
}

// `per_layer_type`: the model's rope_parameters hold one dict per layer type
// (Gemma 3, OLMo 3), whatever spelling this dict comes from.
RopeDict read_rope_dict(const json& j, const std::string& what, const std::string& path, const std::string& owner,
                        const std::set<std::string>& allowed, bool per_layer_type) {
  if (!j.is_object()) throw LoadError(what + ": field '" + path + "' = " + shown_json(j) + ", expected an object");
  TrackedHfConfigFields r(j, what, path + ".");
  RopeDict d;
  d.path = path;
  d.type = agreed_value<std::string>(
               what, {{path + ".rope_type", r.maybe_string("rope_type")}, {path + ".type", r.maybe_string("type")}})
               .value_or("default");
  if (d.type != "default" && allowed.count(d.type) == 0) {
    throw LoadError(what + ": field '" + path + (r.has("rope_type") ? ".rope_type" : ".type") + "' = \"" + d.type +
                    "\" is not implemented for " + owner + " (rope types implemented for it: " + list(allowed) + ")");
  }
  d.theta = r.maybe_number("rope_theta");
  d.partial = r.maybe_number("partial_rotary_factor");
  RopeScaling& s = d.scaling;
  if (d.type == "linear") {
    s.type = "linear";
    s.factor = positive(r, "factor");
  } else if (d.type == "llama3") {
    s.type = "llama3";
    s.factor = positive(r, "factor");
    s.low_freq_factor = r.number("low_freq_factor", s.low_freq_factor);
    s.high_freq_factor = r.number("high_freq_factor", s.high_freq_factor);
    d.original_max_position = r.maybe_integer("original_max_position_embeddings");
  } else if (d.type == "longrope") {
    s.type = "longrope";
    s.short_factor = factor_list(r, "short_factor");
    s.long_factor = factor_list(r, "long_factor");
    s.attention_factor = r.number("attention_factor", 0.0);
    if (s.attention_factor < 0.0) throw LoadError(what + ": field '" + r.path("attention_factor") + "' is negative");
    // The context ratio the attention factor derives from; the caller checks it.
    s.factor = r.number("factor", 0.0);
    d.original_max_position = r.maybe_integer("original_max_position_embeddings");
  } else if (d.type == "yarn") {
    s.type = "yarn";
    // transformers requires the factor key; 5.x derives a null one (finish_yarn).
    if (!j.contains("factor")) throw LoadError(what + ": missing field '" + r.path("factor") + "'");
    // Absent or null attention factor: derived (finish_yarn).
    for (auto [key, out] : {std::pair{"factor", &s.factor}, std::pair{"attention_factor", &s.attention_factor}}) {
      if (const std::optional<double> v = r.maybe_number(key)) {
        if (!(*v > 0.0)) throw LoadError(what + ": field '" + r.path(key) + "' must be positive");
        *out = *v;
      }
    }
    // transformers: `or 32`, `or 1`: a zero or null means the default too.
    s.beta_fast = r.maybe_number("beta_fast").value_or(0.0);
    if (s.beta_fast == 0.0) s.beta_fast = 32.0;
    s.beta_slow = r.maybe_number("beta_slow").value_or(0.0);
    if (s.beta_slow == 0.0) s.beta_slow = 1.0;
    if (!(s.beta_fast > 0.0) || !(s.beta_slow > 0.0)) {
      throw LoadError(what + ": fields '" + r.path("beta_fast") + "' and '" + r.path("beta_slow") +
                      "' must be positive");
    }
    d.mscale = r.maybe_number("mscale");
    d.mscale_all_dim = r.maybe_number("mscale_all_dim");
    s.truncate = r.boolean("truncate", true);
    // transformers 5.x reads `truncate` from the top of rope_parameters, so
    // where that holds per-layer-type dicts (a 4.x rope_scaling is merged
    // into one) it is never applied: only its default is accepted there.
    if (!s.truncate && per_layer_type) {
      throw LoadError(what + ": field '" + r.path("truncate") +
                      "' = false is not implemented (transformers truncates the correction range of a "
                      "per-layer-type rope dict whatever it says)");
    }
    d.original_max_position = r.maybe_integer("original_max_position_embeddings");
  }
  r.reject_unused("rope_type '" + d.type + "' of " + owner);
  return d;
}

bool same_scaling(const RopeScaling& a, const RopeScaling& b) {
  return a.type == b.type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor && a.short_factor == b.short_factor &&
         a.long_factor == b.long_factor && a.attention_factor == b.attention_factor && a.beta_fast == b.beta_fast &&
         a.beta_slow == b.beta_slow && a.truncate == b.truncate;
}

std::string describe(const RopeDict& d) {
  std::string out = "type " + d.type;
  if (d.scaling.factor != 0.0) out += ", factor " + json(d.scaling.factor).dump();
  return out;
}

}  // namespace

HfRope read_hf_rope(TrackedHfConfigFields& f, const std::string& owner, const HfRopeRules& rules) {
  const std::string& what = f.what();
  std::optional<RopeDict> v5, v4;
  if (const json* p = f.get("rope_parameters")) {
    f.mark("rope_parameters");
    if (rules.layer_type.empty()) {
      v5 = read_rope_dict(*p, what, "rope_parameters", owner, rules.scaling_types, false);
    } else {
      if (!p->is_object()) throw f.type_error("rope_parameters", *p, "an object");
      for (auto it = p->begin(); it != p->end(); ++it) {
        if (it.key() != "full_attention" && it.key() != "sliding_attention") {
          throw LoadError(what + ": field 'rope_parameters." + it.key() + "' = " + shown_json(*it) +
                          " is not implemented for " + owner +
                          " (its rope_parameters holds one dict per layer type: full_attention, sliding_attention)");
        }
      }
      auto it = p->find(rules.layer_type);
      if (it != p->end() && !it->is_null()) {
        v5 = read_rope_dict(*it, what, "rope_parameters." + rules.layer_type, owner, rules.scaling_types, true);
      }
    }
  }
  if (rules.v4_scaling) {
    if (const json* s = f.get("rope_scaling")) {
      f.mark("rope_scaling");
      v4 = read_rope_dict(*s, what, "rope_scaling", owner, rules.scaling_types, !rules.layer_type.empty());
    }
  }

  HfSpellings<double> theta, partial;
  for (const auto& k : rules.theta_keys) theta.emplace_back(k, f.maybe_number(k));
  for (const auto& k : rules.partial_keys) partial.emplace_back(k, f.maybe_number(k));
  HfSpellings<int64_t> original;
  for (const auto* d : {&v4, &v5}) {
    if (!*d) continue;
    theta.emplace_back((*d)->path + ".rope_theta", (*d)->theta);
    partial.emplace_back((*d)->path + ".partial_rotary_factor", (*d)->partial);
    original.emplace_back((*d)->path + ".original_max_position_embeddings", (*d)->original_max_position);
  }
  HfRope out;
  out.theta = agreed_value(what, theta).value_or(rules.default_theta);
  if (!(out.theta > 0.0)) throw LoadError(what + ": the rope base (rope_theta) must be positive");
  const auto* partial_given = agreed_spelling(what, partial);
  out.partial_rotary_factor = partial_given ? *partial_given->second : rules.default_partial;
  if (!(out.partial_rotary_factor > 0.0 && out.partial_rotary_factor <= 1.0)) {
    throw LoadError(what + ": field '" + (partial_given ? partial_given->first : "partial_rotary_factor") +
                    "' = " + json(out.partial_rotary_factor).dump() + " must be in (0, 1]");
  }
  if (!rules.partial_rotary && out.partial_rotary_factor != 1.0) {
    throw LoadError(what + ": field '" + partial_given->first + "' = " + json(out.partial_rotary_factor).dump() +
                    " is not implemented for " + owner + " (rotary embedding on part of each head; only 1.0)");
  }
  out.original_max_position = agreed_value(what, original);
  if (v4 && v5 &&
      (!same_scaling(v4->scaling, v5->scaling) || v4->mscale != v5->mscale ||
       v4->mscale_all_dim != v5->mscale_all_dim)) {
    throw LoadError(what + ": fields 'rope_scaling' (" + describe(*v4) + ") and '" + v5->path + "' (" + describe(*v5) +
                    ") disagree (two spellings of one setting must say the same)");
  }
  out.scaling = v5 ? v5->scaling : v4 ? v4->scaling : RopeScaling{};
  if (v5 || v4) {
    const RopeDict& d = v5 ? *v5 : *v4;
    out.scaling_path = d.path;
    out.mscale = d.mscale;
    out.mscale_all_dim = d.mscale_all_dim;
  }
  return out;
}

void finish_yarn(RopeScaling& s, const HfRope& rope, int64_t max_position) {
  if (s.type != "yarn") return;
  s.original_max_position = rope.original_max_position.value_or(max_position);
  if (s.factor == 0.0) s.factor = static_cast<double>(max_position) / static_cast<double>(s.original_max_position);
  if (s.attention_factor == 0.0) {
    auto mscale = [&](double m) { return s.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(s.factor) + 1.0; };
    const double m = rope.mscale.value_or(0.0), all = rope.mscale_all_dim.value_or(0.0);
    s.attention_factor = m != 0.0 && all != 0.0 ? mscale(m) / mscale(all) : mscale(1.0);
  }
}

}  // namespace nnsight
