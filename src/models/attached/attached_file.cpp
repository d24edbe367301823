#include "models/attached/attached_file.h"

#include <ATen/ATen.h>

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

#include "core/npz/npz_file.h"
#include "core/safetensors/safetensors_file.h"
#include "core/shape_string.h"
#include "core/untrusted_json.h"
#include "models/attached/linear_probe.h"
#include "models/attached/sparse_autoencoder.h"
#include "models/attached/steering_vector.h"

namespace nnsight {

namespace {

constexpr size_t kMaxCfgBytes = 1 << 20;  // SAELens's cfg.json is a few KB

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
std::string directory_of(const std::string& file) {
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? "." : file.substr(0, slash);
}

// A tensor of the file as float32, with the shape `expected` (-1: any size).
at::Tensor load_tensor(const SafetensorsFile& f, const std::string& name, const std::vector<int64_t>& expected,
                       const std::string& meaning) {
  const SafetensorsTensorInfo* info = f.find(name);
  if (info == nullptr) throw LoadError(f.path() + ": no tensor '" + name + "' (" + meaning + ")");
  bool ok = info->shape.size() == expected.size();
  for (size_t i = 0; ok && i < expected.size(); ++i) ok = expected[i] < 0 || expected[i] == info->shape[i];
  if (!ok) {
    std::vector<std::string> dims;
    for (int64_t d : expected) dims.push_back(d < 0 ? "*" : std::to_string(d));
    std::string want = "[";
    for (size_t i = 0; i < dims.size(); ++i) want += (i ? ", " : "") + dims[i];
    throw LoadError(f.path() + ": tensor '" + name + "' is " + shape_string(info->shape) + ", expected " + want +
                    "] (" + meaning + ")");
  }
  if (!at::isFloatingType(info->dtype))
    throw LoadError(f.path() + ": tensor '" + name + "' is " + info->dtype_name + ", expected a float type");
  return f.load(name).to(at::kFloat);
}

int64_t cfg_int(const nlohmann::json& cfg, const std::string& cfg_path, const std::string& field) {
  const nlohmann::json& v = cfg.at(field);
  if (!v.is_number_integer()) throw LoadError(cfg_path + ": field '" + field + "' must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

std::shared_ptr<AttachedModule> load_sae(const SafetensorsFile& f, const std::string& cfg_path) {
  if (!exists(cfg_path))
    throw LoadError(cfg_path + ": missing (an SAE's cfg.json, SAELens's layout, must lie beside " + f.path() + ")");
  nlohmann::json cfg = read_untrusted_json_file(cfg_path, kMaxCfgBytes);
  if (!cfg.is_object()) throw LoadError(cfg_path + ": expected a JSON object");

  SaeWeights w;
  // The activation: SAELens 6's "architecture", or the older activation_fn_str.
  std::string field = "architecture";
  std::string act;
  if (cfg.contains("architecture") && !cfg["architecture"].is_null()) {
    if (!cfg["architecture"].is_string()) throw LoadError(cfg_path + ": field 'architecture' must be a string");
    act = cfg["architecture"].get<std::string>();
  }
  if (act.empty() || act == "standard") {
    for (const char* f2 : {"activation_fn_str", "activation_fn"})
      if (cfg.contains(f2) && cfg[f2].is_string()) {
        field = f2;
        act = cfg[f2].get<std::string>();
        break;
      }
  }
  if (act.empty() || act == "standard" || act == "relu") {
    w.activation = SaeActivation::kReLU;
  } else if (act == "jumprelu") {
    w.activation = SaeActivation::kJumpReLU;
  } else if (act == "topk") {
    w.activation = SaeActivation::kTopK;
  } else {
    throw LoadError(cfg_path + ": field '" + field + "' names the activation '" + act +
                    "', which is not supported (standard/relu, jumprelu, topk)");
  }

  const at::Tensor W_enc = load_tensor(f, "W_enc", {-1, -1}, "the encoder, [d_in, d_sae]");
  const int64_t d_in = W_enc.size(0), d_sae = W_enc.size(1);
  for (const char* name : {"d_in", "d_sae"}) {
    if (!cfg.contains(name)) continue;
    const int64_t want = std::string(name) == "d_in" ? d_in : d_sae;
    if (cfg_int(cfg, cfg_path, name) != want)
      throw LoadError(cfg_path + ": field '" + name + "' is " + std::to_string(cfg_int(cfg, cfg_path, name)) +
                      " but W_enc in " + f.path() + " is " + shape_string(W_enc.sizes()));
  }
  w.W_enc = W_enc;
  w.b_enc = load_tensor(f, "b_enc", {d_sae}, "the encoder bias, [d_sae]");
  w.W_dec = load_tensor(f, "W_dec", {d_sae, -1}, "the decoder, [d_sae, d_out]");
  const int64_t d_out = w.W_dec.size(1);
  if (cfg.contains("d_out") && cfg_int(cfg, cfg_path, "d_out") != d_out)
    throw LoadError(cfg_path + ": field 'd_out' is " + std::to_string(cfg_int(cfg, cfg_path, "d_out")) +
                    " but W_dec in " + f.path() + " is " + shape_string(w.W_dec.sizes()));
  w.b_dec = load_tensor(f, "b_dec", {d_out}, "the decoder bias, [d_out]");
  if (w.activation == SaeActivation::kJumpReLU)
    w.threshold = load_tensor(f, "threshold", {d_sae}, "JumpReLU's thresholds, [d_sae]");
  if (w.activation == SaeActivation::kTopK) {
    std::string k_field = "k";
    const nlohmann::json* holder = cfg.contains("k") ? &cfg : nullptr;
    if (!holder && cfg.contains("activation_fn_kwargs") && cfg["activation_fn_kwargs"].is_object() &&
        cfg["activation_fn_kwargs"].contains("k")) {
      holder = &cfg["activation_fn_kwargs"];
      k_field = "activation_fn_kwargs.k";
    }
    if (!holder) throw LoadError(cfg_path + ": a topk SAE needs field 'k' (or activation_fn_kwargs.k)");
    const nlohmann::json& k = holder->at("k");
    if (!k.is_number_integer() || k.get<int64_t>() < 1 || k.get<int64_t>() > d_sae)
      throw LoadError(cfg_path + ": field '" + k_field +
                      "' must be an integer in [1, d_sae = " + std::to_string(d_sae) + "], got " + k.dump());
    w.k = k.get<int64_t>();
  }
  if (cfg.contains("apply_b_dec_to_input") && !cfg["apply_b_dec_to_input"].is_null()) {
    if (!cfg["apply_b_dec_to_input"].is_boolean())
      throw LoadError(cfg_path + ": field 'apply_b_dec_to_input' must be true or false");
    w.apply_b_dec_to_input = cfg["apply_b_dec_to_input"].get<bool>();
  }
  if (d_out != d_in) {
    if (cfg.contains("apply_b_dec_to_input") && w.apply_b_dec_to_input)
      throw LoadError(cfg_path + ": field 'apply_b_dec_to_input' is true, but this is a transcoder (d_out " +
                      std::to_string(d_out) + " != d_in " + std::to_string(d_in) + "): b_dec cannot be subtracted");
    w.apply_b_dec_to_input = false;
  }
  if (cfg.contains("normalize_activations")) {
    const nlohmann::json& n = cfg["normalize_activations"];
    if (!n.is_null() && !(n.is_string() && n.get<std::string>() == "none"))
      throw LoadError(cfg_path + ": field 'normalize_activations' is " + n.dump() + ", which is not supported (none)");
  }
  return std::make_shared<SparseAutoencoder>(f.path(), std::move(w));
}

// Gemma Scope's release (google/gemma-scope-*): params.npz with W_enc
// [d_in, d_sae], W_dec [d_sae, d_in], b_enc, b_dec and threshold, no cfg.
// JumpReLU on x @ W_enc + b_enc (its encoder does not subtract b_dec).
std::shared_ptr<AttachedModule> load_gemma_scope(const std::string& path) {
  NpzFile f(path);
  const auto array = [&](const std::string& name, const std::vector<int64_t>& expected, const std::string& meaning) {
    const NpyArrayInfo* a = f.find(name);
    if (a == nullptr) throw LoadError(path + ": no array '" + name + "' (" + meaning + "; Gemma Scope's params.npz)");
    bool ok = a->shape.size() == expected.size();
    for (size_t i = 0; ok && i < expected.size(); ++i) ok = expected[i] < 0 || expected[i] == a->shape[i];
    if (!ok) {
      std::string want = "[";
      for (size_t i = 0; i < expected.size(); ++i)
        want += (i ? ", " : "") + (expected[i] < 0 ? std::string("*") : std::to_string(expected[i]));
      throw LoadError(path + ": array '" + name + "' is " + shape_string(a->shape) + ", expected " + want + "] (" +
                      meaning + ")");
    }
    return f.load_float(name);
  };
  SaeWeights w;
  w.activation = SaeActivation::kJumpReLU;
  w.apply_b_dec_to_input = false;
  w.W_enc = array("W_enc", {-1, -1}, "the encoder, [d_in, d_sae]");
  const int64_t d_in = w.W_enc.size(0), d_sae = w.W_enc.size(1);
  w.b_enc = array("b_enc", {d_sae}, "the encoder bias, [d_sae]");
  w.W_dec = array("W_dec", {d_sae, d_in}, "the decoder, [d_sae, d_in]");
  w.b_dec = array("b_dec", {d_in}, "the decoder bias, [d_in]");
  w.threshold = array("threshold", {d_sae}, "JumpReLU's thresholds, [d_sae]");
  return std::make_shared<SparseAutoencoder>(path, std::move(w));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::shared_ptr<AttachedModule> load_attached_module(const std::string& file) {
  std::string weights = file;
  if (is_directory(file)) {
    weights = file + "/sae_weights.safetensors";
    if (!exists(weights) && exists(file + "/params.npz")) return load_gemma_scope(file + "/params.npz");
    if (!exists(weights))
      throw LoadError(file +
                      ": a directory without sae_weights.safetensors (SAELens's layout) or params.npz "
                      "(Gemma Scope's)");
  } else if (!exists(file)) {
    throw LoadError(file + ": no such file");
  } else if (ends_with(file, ".npz")) {
    return load_gemma_scope(file);
  }
  SafetensorsFile f(weights);
  if (f.find("W_enc")) return load_sae(f, directory_of(weights) + "/cfg.json");
  if (f.find("vector")) {
    at::Tensor v = load_tensor(f, "vector", {-1}, "the steering vector, [d_in]");
    return std::make_shared<SteeringVector>(f.path(), v);
  }
  if (f.find("weight")) {
    at::Tensor weight = load_tensor(f, "weight", {-1, -1}, "the probe, [n_out, d_in]");
    at::Tensor bias;
    if (f.find("bias")) bias = load_tensor(f, "bias", {weight.size(0)}, "the probe's bias, [n_out]");
    return std::make_shared<LinearProbe>(f.path(), weight, bias);
  }
  throw LoadError(f.path() +
                  ": not an attached module: no 'W_enc' (an SAE or transcoder), 'weight' (a linear probe) or "
                  "'vector' (a steering vector)");
}

}  // namespace nnsight
