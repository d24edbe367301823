#include "runner/model_runner/model_structure.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

#include "batching/flattener.h"
#include "models/attached/attached_module.h"
#include "core/hook_point.h"

namespace nnsight::runner {

ModelStructure::ModelStructure(std::vector<ModuleInfo> modules, std::vector<std::string> events)
    : modules_(std::move(modules)), events_(std::move(events)) {
  index();
}

void ModelStructure::index() {
  order_.clear();
  by_path_.clear();
  // The events' text is the wire form (to_json, the executor's wire); parsed once here.
  for (size_t i = 0; i < events_.size(); ++i)
    if (auto key = parse_provider_key(events_[i])) order_.emplace(std::move(*key), static_cast<int64_t>(i));
  for (size_t i = 0; i < modules_.size(); ++i) by_path_.emplace(modules_[i].path, i);
}

namespace {
std::vector<ProbedTensor> probed(const ModuleIO& io) {
  std::vector<ProbedTensor> out;
  for (const auto& t : io.items())
    out.push_back(t.defined() ? ProbedTensor{t.sizes().vec(), static_cast<int8_t>(t.scalar_type())} : ProbedTensor());
  return out;
}

nlohmann::json probed_json(const std::vector<ProbedTensor>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : v) out.push_back(t.defined() ? nlohmann::json{{"shape", t.sizes}, {"dtype", t.dtype}} : nullptr);
  return out;
}

std::vector<ProbedTensor> probed_from_json(const nlohmann::json& j) {
  std::vector<ProbedTensor> out;
  for (const auto& t : j)
    out.push_back(t.is_null() ? ProbedTensor()
                              : ProbedTensor{t.at("shape").get<std::vector<int64_t>>(), t.at("dtype").get<int8_t>()});
  return out;
}

const char* row_level_name(batching::RowLevel r) {
  switch (r) {
    case batching::RowLevel::kPrompt:
      return "prompt";
    case batching::RowLevel::kRouted:
      return "routed";
    case batching::RowLevel::kSequence:
      return "sequence";
    default:
      return "token";
  }
}
}  // namespace

nlohmann::json ModelStructure::to_json() const {
  nlohmann::json mods = nlohmann::json::array();
  for (const auto& m : modules_)
    mods.push_back({{"path", m.path},
                    {"type", m.type_name},
                    {"tuple", m.output_tuple_size},
                    {"rows", row_level_name(m.row_level)},
                    {"callable", m.callable},
                    {"inputs", probed_json(m.inputs)},
                    {"outputs", probed_json(m.outputs)}});
  return {{"modules", mods},
          {"events", events_},
          {"functions", functions_},
          {"logits", logits_.defined() ? nlohmann::json{{"shape", logits_.sizes}, {"dtype", logits_.dtype}}
                                       : nlohmann::json(nullptr)}};
}

ModelStructure ModelStructure::from_json(const nlohmann::json& j, const std::string& what) {
  try {
    std::vector<ModuleInfo> modules;
    for (const auto& m : j.at("modules")) {
      ModuleInfo info{m.at("path").get<std::string>(), m.at("type").get<std::string>(), m.at("tuple").get<int32_t>()};
      const std::string rows = m.at("rows").get<std::string>();
      info.row_level = rows == "prompt"     ? batching::RowLevel::kPrompt
                       : rows == "routed"   ? batching::RowLevel::kRouted
                       : rows == "sequence" ? batching::RowLevel::kSequence
                                            : batching::RowLevel::kToken;
      info.callable = m.at("callable").get<bool>();
      // Probed shapes (for scan); a server older than them sends none.
      if (m.contains("inputs")) info.inputs = probed_from_json(m.at("inputs"));
      if (m.contains("outputs")) info.outputs = probed_from_json(m.at("outputs"));
      modules.push_back(std::move(info));
    }
    ModelStructure s(std::move(modules), j.at("events").get<std::vector<std::string>>());
    s.set_functions(j.at("functions").get<std::vector<std::string>>());
    if (j.contains("logits") && !j.at("logits").is_null())
      s.set_logits(probed_from_json(nlohmann::json::array({j.at("logits")})).front());
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw LoadError(what + ": malformed model structure: " + e.what());
  }
}

ModelStructure ModelStructure::probe(CausalLM& model, std::vector<KVCache>& kv) {
  std::vector<ModuleInfo> modules;
  std::vector<std::string> events;
  std::vector<HookHandle> handles;
  for (auto& [path, m] : model.named_hookable_modules()) {
    if (path.empty()) continue;  // the root is not an envoy
    const size_t index = modules.size();
    modules.push_back(ModuleInfo{path, m->type_name(), m->output_tuple_size()});
    if (m->row_tokens() != nullptr) modules.back().row_level = batching::RowLevel::kRouted;
    // A per-sequence point's values are one sequence's at a time ([heads, query, key]).
    if (auto* point = dynamic_cast<HookPoint*>(m); point && point->per_sequence())
      modules.back().row_level = batching::RowLevel::kSequence;
    modules.back().callable = m->callable();
    const std::string p = path;
    handles.push_back(m->register_forward_pre_hook([&events, &modules, index, p](Module&, const ModuleIO& in) {
      events.push_back(ProviderKey::of_module(p, KeyKind::ModuleInput).str());
      if (modules[index].inputs.empty()) modules[index].inputs = probed(in);
      return std::optional<ModuleIO>();
    }));
    handles.push_back(
        m->register_forward_hook([&events, &modules, index, p](Module&, const ModuleIO&, const ModuleIO& out) {
          events.push_back(ProviderKey::of_module(p, KeyKind::ModuleOutput).str());
          if (modules[index].outputs.empty()) modules[index].outputs = probed(out);
          // Two tokens, one sampling row: a module whose rows are the sampling
          // rows runs after the last-token selection.
          if (modules[index].row_level == batching::RowLevel::kToken && !out.empty() && out.at(0).defined() &&
              out.at(0).dim() > 0 && out.at(0).size(0) == 1)
            modules[index].row_level = batching::RowLevel::kPrompt;
          return std::optional<ModuleIO>();
        }));
  }
  // Attached modules run only where something splices them: here, so that
  // their points' events and row levels are recorded (and a hook point of
  // the wrong width fails start-up).
  for (AttachedModule* a : attached_modules(model)) handles.push_back(a->splice());
  ProbedTensor logits;
  try {
    at::NoGradGuard no_grad;
    batching::SeqSlot slot;
    slot.token_ids = std::vector<int32_t>(kProbeTokens, 1);
    slot.block_table = {0};
    slot.sample = true;
    batching::FlatBatch batch = batching::flatten_slots({slot}, kv.front().block_size());
    auto dev = model.options().device();
    at::Tensor ids = batch.token_ids.to(dev);
    batching::BatchMeta m = dev.is_cpu() ? batch.meta : batch.meta.to(dev);
    at::Tensor hidden = model.forward(ids, m, kv);
    const at::Tensor l = model.compute_logits(hidden, m.logits_rows);
    logits = ProbedTensor{l.sizes().vec(), static_cast<int8_t>(l.scalar_type())};
  } catch (...) {
    for (auto& h : handles) h.remove();
    throw;
  }
  for (auto& h : handles) h.remove();
  for (KeyKind k : {KeyKind::Logits, KeyKind::Samples, KeyKind::Result}) events.push_back(ProviderKey{k, {}}.str());
  ModelStructure s(std::move(modules), std::move(events));
  s.set_logits(std::move(logits));
  return s;
}

const ModuleInfo* ModelStructure::find_module(const std::string& path) const {
  auto it = by_path_.find(path);
  return it == by_path_.end() ? nullptr : &modules_[it->second];
}

batching::RowLevel ModelStructure::row_level(const ProviderKey& key) const {
  if (!key.is_module()) return batching::RowLevel::kPrompt;
  if (const ModuleInfo* m = find_module(key.module_path)) return m->row_level;
  return batching::RowLevel::kToken;
}

bool ModelStructure::has_function(const std::string& name) const {
  return std::binary_search(functions_.begin(), functions_.end(), name);
}

int64_t ModelStructure::order_of(const ProviderKey& key) const {
  // ".inputs" shares ".input"'s place; a skip is set when the module is about
  // to run: its input's place too.
  const bool at_input = key.kind == KeyKind::ModuleInputs || key.kind == KeyKind::ModuleSkip;
  auto it = at_input ? order_.find(ProviderKey::of_module(key.module_path, KeyKind::ModuleInput)) : order_.find(key);
  return it == order_.end() ? -1 : it->second;
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::string ModelStructure::closest_path(const std::string& path) const {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& m : modules_) {
    const size_t d = edit_distance(path, m.path);
    if (d < best_d) {
      best_d = d;
      best = m.path;
    }
  }
  return best;
}

}  // namespace nnsight::runner
