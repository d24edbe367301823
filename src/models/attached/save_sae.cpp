// nnsight::save_sae (include/nnsight/attached.hpp): an SAE in SAELens's layout.
#include <nnsight/attached.hpp>

#include <ATen/ATen.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_writer.h"
#include "core/shape_string.h"

namespace nnsight {

namespace {
void check_shape(const at::Tensor& t, const char* name, std::vector<int64_t> want) {
  if (!t.defined() || t.sizes() != at::IntArrayRef(want))
    throw Error(std::string("save_sae: ") + name + " is " + (t.defined() ? shape_string(t.sizes()) : "missing") +
                ", expected " + shape_string(want));
}
}  // namespace

void save_sae(const std::string& directory, const SaeFiles& sae) {
  if (!sae.W_enc.defined() || sae.W_enc.dim() != 2) throw Error("save_sae: W_enc must be [d_in, d_sae]");
  const int64_t d_in = sae.W_enc.size(0), d_sae = sae.W_enc.size(1);
  check_shape(sae.b_enc, "b_enc", {d_sae});
  check_shape(sae.W_dec, "W_dec", {d_sae, d_in});
  check_shape(sae.b_dec, "b_dec", {d_in});
  std::vector<std::pair<std::string, at::Tensor>> tensors = {{"W_enc", sae.W_enc.detach().to(at::kFloat)},
                                                             {"b_enc", sae.b_enc.detach().to(at::kFloat)},
                                                             {"W_dec", sae.W_dec.detach().to(at::kFloat)},
                                                             {"b_dec", sae.b_dec.detach().to(at::kFloat)}};
  if (sae.architecture == "jumprelu") {
    check_shape(sae.threshold, "threshold", {d_sae});
    tensors.emplace_back("threshold", sae.threshold.detach().to(at::kFloat));
  } else if (sae.architecture == "topk") {
    if (sae.k < 1 || sae.k > d_sae) throw Error("save_sae: k must be in [1, d_sae] for a topk SAE");
  } else if (sae.architecture != "standard") {
    throw Error("save_sae: architecture '" + sae.architecture + "' (standard, jumprelu, topk)");
  }
  if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error("save_sae: cannot create " + directory + ": " + std::strerror(errno));
  write_safetensors(directory + "/sae_weights.safetensors", tensors);
  nlohmann::json cfg = {{"architecture", sae.architecture},
                        {"d_in", d_in},
                        {"d_sae", d_sae},
                        {"dtype", "float32"},
                        {"apply_b_dec_to_input", sae.apply_b_dec_to_input},
                        {"normalize_activations", "none"}};
  if (sae.architecture == "topk") cfg["k"] = sae.k;
  if (!sae.hook_name.empty()) cfg["hook_name"] = sae.hook_name;
  std::ofstream out(directory + "/cfg.json");
  out << cfg.dump(2) << "\n";
  if (!out) throw Error("save_sae: cannot write " + directory + "/cfg.json");
}

}  // namespace nnsight
