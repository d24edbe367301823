#include "core/hf/hf_checkpoint.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <absl/strings/match.h>

#include <map>

#include <nnsight/error.hpp>

#include "core/hf/hf_config.h"
#include "core/shape_string.h"
#include "core/untrusted_json.h"

namespace nnsight {
namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The Hugging Face name of a stored tensor; nullopt for buffers that are not
// parameters (GPT-2's causal masks, old Llama rotary caches).
std::optional<std::string> canonical_name(const ModelConfig& config, const std::string& stored) {
  const std::string& arch = config.architecture;
  if (config.multimodal == "gemma3") {
    // Gemma3ForConditionalGeneration: saved (by 4.x and 5.x alike) as
    // language_model.model.* / language_model.lm_head.*, served under the
    // module tree transformers builds (model.language_model.*, lm_head.*).
    // The vision tower and projector are not built.
    for (const char* image :
         {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."})
      if (absl::StartsWith(stored, image)) return std::nullopt;
    if (absl::EndsWith(stored, "rotary_emb.inv_freq")) return std::nullopt;
    if (absl::StartsWith(stored, "language_model.model."))
      return "model.language_model." + stored.substr(std::string("language_model.model.").size());
    if (absl::StartsWith(stored, "language_model.lm_head."))
      return stored.substr(std::string("language_model.").size());
    return stored;
  }
  if (arch == "gpt2") {
    if (absl::EndsWith(stored, ".attn.bias") || absl::EndsWith(stored, ".attn.masked_bias")) return std::nullopt;
    if (absl::StartsWith(stored, "transformer.") || absl::StartsWith(stored, "lm_head.")) return stored;
    return "transformer." + stored;  // saved from GPT2Model rather than GPT2LMHeadModel
  }
  if (absl::EndsWith(stored, "rotary_emb.inv_freq")) return std::nullopt;
  if (arch == "gpt_neox") {
    // Old checkpoints store the causal mask buffers.
    if (absl::EndsWith(stored, ".attention.bias") || absl::EndsWith(stored, ".attention.masked_bias"))
      return std::nullopt;
    if (absl::StartsWith(stored, "gpt_neox.") || absl::StartsWith(stored, "embed_out.")) return stored;
    return "gpt_neox." + stored;  // saved from GPTNeoXModel
  }
  if (absl::StartsWith(stored, "model.") || absl::StartsWith(stored, "lm_head.")) return stored;
  return "model." + stored;  // saved from LlamaModel rather than LlamaForCausalLM
}

bool is_conv1d_weight(const std::string& arch, const std::string& name) {
  return arch == "gpt2" && absl::StartsWith(name, "transformer.h.") &&
         (absl::EndsWith(name, ".attn.c_attn.weight") || absl::EndsWith(name, ".attn.c_proj.weight") ||
          absl::EndsWith(name, ".mlp.c_fc.weight") || absl::EndsWith(name, ".mlp.c_proj.weight"));
}

// generation_config.json's eos ids also end a sequence, as in transformers'
// generate and vLLM (Llama 3 Instruct's <|eot_id|>, Gemma's <end_of_turn>
// are only there). Only eos_token_id is read: its sampling defaults
// (temperature, top_p, ...) are not applied; a request says its own.
void add_generation_config_eos(const std::string& path, ModelConfig& config) {
  if (!is_file(path)) return;
  const nlohmann::json j = read_untrusted_json_file(path, 1u << 20);
  if (!j.is_object()) throw LoadError(path + ": expected a JSON object");
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return;
  const nlohmann::json ids = it->is_array() ? *it : nlohmann::json::array({*it});
  for (const nlohmann::json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= config.vocab_size)
      throw LoadError(path + ": field 'eos_token_id' holds " + id.dump() + ", not a token id of the " +
                      std::to_string(config.vocab_size) + "-token vocabulary");
    config.add_eos_token_id(id.get<int64_t>());
  }
}

}  // namespace

HfCheckpoint::HfCheckpoint(const std::string& path) : describe_(path) {
  std::string single;
  if (is_dir(path)) {
    dir_ = path;
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  } else if (is_file(path) && absl::EndsWith(path, ".safetensors")) {
    single = path;
    size_t slash = path.find_last_of('/');
    dir_ = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  } else {
    throw LoadError(path + ": not a Hugging Face checkpoint directory or .safetensors file");
  }
  const std::string config_path = dir_ + "/config.json";
  if (!is_file(config_path)) throw LoadError(dir_ + ": no config.json");
  config_ = read_hf_config(config_path);
  add_generation_config_eos(dir_ + "/generation_config.json", config_);

  if (!single.empty()) {
    const SafetensorsFile& f = open_file(single.substr(single.find_last_of('/') + 1));
    for (const SafetensorsTensorInfo& t : f.tensors()) add_tensor(f, t.name);
  } else if (is_file(dir_ + "/model.safetensors")) {
    const SafetensorsFile& f = open_file("model.safetensors");
    for (const SafetensorsTensorInfo& t : f.tensors()) add_tensor(f, t.name);
  } else if (is_file(dir_ + "/model.safetensors.index.json")) {
    const std::string index_path = dir_ + "/model.safetensors.index.json";
    nlohmann::json index = read_untrusted_json_file(index_path, 64u << 20);
    auto map = index.is_object() ? index.find("weight_map") : index.end();
    if (map == index.end() || !map->is_object()) {
      throw LoadError(index_path + ": no 'weight_map' object");
    }
    for (auto it = map->begin(); it != map->end(); ++it) {
      if (!it.value().is_string()) {
        throw LoadError(index_path + ": weight_map entry '" + it.key() + "' is not a file name");
      }
      const std::string shard = it.value().get<std::string>();
      // Shards live in the checkpoint directory; a path would let an index reach elsewhere.
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
        throw LoadError(index_path + ": weight_map entry '" + it.key() + "' names shard '" + shard +
                        "', not a file in the checkpoint directory");
      }
      const SafetensorsFile& f = open_file(shard);
      if (f.find(it.key()) == nullptr) {
        throw LoadError(index_path + ": tensor '" + it.key() + "' is mapped to '" + shard +
                        "', which does not contain it");
      }
      add_tensor(f, it.key());
    }
  } else {
    std::string hint = is_file(dir_ + "/pytorch_model.bin")
                           ? " (pytorch_model.bin checkpoints are not supported; convert to safetensors)"
                           : "";
    throw LoadError(dir_ + ": no model.safetensors or model.safetensors.index.json" + hint);
  }

  const std::string head = config_.architecture == "gpt_neox" ? "embed_out.weight" : "lm_head.weight";
  if (!has(head) && config_.tie_word_embeddings) {
    const std::string embed = config_.architecture == "gpt2"       ? "transformer.wte.weight"
                              : config_.architecture == "gpt_neox" ? "gpt_neox.embed_in.weight"
                              : config_.multimodal == "gemma3"     ? "model.language_model.embed_tokens.weight"
                                                                   : "model.embed_tokens.weight";
    if (has(embed)) {
      entries_.emplace(head, entries_.at(embed));
      order_.push_back(head);
    }
  }
}

const SafetensorsFile& HfCheckpoint::open_file(const std::string& file_name) {
  const std::string full = dir_ + "/" + file_name;
  for (const auto& f : files_) {
    if (f->path() == full) return *f;
  }
  files_.push_back(std::make_unique<SafetensorsFile>(full));
  return *files_.back();
}

void HfCheckpoint::add_tensor(const SafetensorsFile& file, const std::string& stored_name) {
  std::optional<std::string> name = canonical_name(config_, stored_name);
  if (!name) return;
  Entry e;
  e.file = &file;
  e.stored_name = stored_name;
  e.conv1d = is_conv1d_weight(config_.architecture, *name);
  if (e.conv1d && file.info(stored_name).shape.size() != 2) {
    throw LoadError(file.path() + ": tensor '" + stored_name + "' has shape " +
                    shape_string(file.info(stored_name).shape) + ", expected a 2-D Conv1D weight");
  }
  auto [it, inserted] = entries_.emplace(*name, e);
  if (!inserted) {
    throw LoadError(file.path() + ": tensor '" + stored_name + "' duplicates '" + it->second.stored_name + "' in " +
                    it->second.file->path() + " (both are '" + *name + "')");
  }
  order_.push_back(*name);
}

const HfCheckpoint::Entry& HfCheckpoint::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw LoadError(describe_ + ": no tensor '" + name + "'");
  return it->second;
}

std::vector<int64_t> HfCheckpoint::shape(const std::string& name) const {
  const Entry& e = entry(name);
  std::vector<int64_t> s = e.file->info(e.stored_name).shape;
  if (e.conv1d) std::swap(s[0], s[1]);
  return s;
}

at::Tensor HfCheckpoint::load(const std::string& name, ShardSlice slice) const {
  const Entry& e = entry(name);
  const std::vector<int64_t> s = shape(name);
  const int64_t rank = static_cast<int64_t>(s.size());
  if (slice.is_whole()) {
    at::Tensor t = e.file->load(e.stored_name).to(at::kFloat);
    return e.conv1d ? t.t().contiguous() : t;
  }
  if (slice.dim > 1 || slice.dim >= rank || slice.start < 0 || slice.length < 0 || slice.start > s[slice.dim] ||
      slice.length > s[slice.dim] - slice.start) {
    throw LoadError(e.file->path() + ": tensor '" + name + "' of shape " + shape_string(s) + ": slice dim " +
                    std::to_string(slice.dim) + " [" + std::to_string(slice.start) + ", +" +
                    std::to_string(slice.length) + ") is out of range");
  }
  if (e.conv1d) {
    // Rows of the served [out, in] are columns of the stored [in, out].
    at::Tensor stored = e.file->load(e.stored_name);  // [in, out]
    return stored.narrow(1 - slice.dim, slice.start, slice.length).t().to(at::kFloat).contiguous();
  }
  if (slice.dim == 0) return e.file->load_rows(e.stored_name, slice.start, slice.length).to(at::kFloat);
  return e.file->load(e.stored_name).narrow(1, slice.start, slice.length).to(at::kFloat).contiguous();
}

std::optional<std::string> HfCheckpoint::tokenizer_json_path() const {
  std::string p = dir_ + "/tokenizer.json";
  if (is_file(p)) return p;
  return std::nullopt;
}

}  // namespace nnsight
