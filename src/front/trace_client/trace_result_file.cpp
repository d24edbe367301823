#include "front/trace_client/trace_result_file.h"

#include <map>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>

#include "core/safetensors/safetensors_file.h"
#include "core/safetensors/safetensors_writer.h"
#include "core/untrusted_json.h"

namespace nnsight::tracing {
namespace {

std::string list_item_name(const std::string& name, size_t i, size_t size) {
  const size_t width = size == 0 ? 1 : std::to_string(size - 1).size();
  std::string index = std::to_string(i);
  return name + "." + std::string(width - index.size(), '0') + index;
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

FinishReason finish_reason_from(const std::string& s) {
  if (s == "length") return FinishReason::kLength;
  if (s == "stop") return FinishReason::kStop;
  if (s == "abort") return FinishReason::kAbort;
  if (s == "error") return FinishReason::kError;
  return FinishReason::kNone;
}

std::map<std::string, std::string> metadata(const TraceResult& result, const std::vector<std::string>& prompts) {
  nlohmann::json texts = nlohmann::json::array(), outputs = nlohmann::json::array(), lists = nlohmann::json::object();
  for (const auto& o : result.outputs()) {
    texts.push_back(o.text);
    outputs.push_back({{"prompt_token_ids", o.prompt_token_ids},
                       {"token_ids", o.token_ids},
                       {"finish_reason", to_string(o.finish_reason)}});
  }
  for (const auto& [name, v] : result.saves())
    if (v.is_list) lists[name] = v.list.size();
  return {{"format", "nnsight.trace"},
          {"prompts", dump(nlohmann::json(prompts))},
          {"texts", dump(texts)},
          {"outputs", dump(outputs)},
          {"lists", dump(lists)}};
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> flatten_saves(const TraceResult& result) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, v] : result.saves()) {
    if (!v.is_list) {
      if (v.tensor.defined()) out.emplace_back(name, v.tensor);
      continue;
    }
    for (size_t i = 0; i < v.list.size(); ++i)
      if (v.list[i].defined()) out.emplace_back(list_item_name(name, i, v.list.size()), v.list[i]);
  }
  return out;
}

std::string encode_trace_result(const TraceResult& result, const std::vector<std::string>& prompts) {
  return safetensors_bytes(flatten_saves(result), metadata(result, prompts));
}

void write_trace_result(const std::string& path, const TraceResult& result, const std::vector<std::string>& prompts) {
  write_safetensors(path, flatten_saves(result), metadata(result, prompts));
}

TraceResult decode_trace_result(std::string bytes, const std::string& what) {
  SafetensorsFile file(what, std::move(bytes));
  const auto& meta = file.metadata();
  auto field = [&](const char* key) {
    auto it = meta.find(key);
    if (it == meta.end()) throw LoadError(what + ": not an nnsight trace result (no '" + key + "' metadata)");
    return parse_untrusted_json(it->second.data(), it->second.size(), what + " metadata '" + key + "'");
  };
  if (meta.count("format") == 0 || meta.at("format") != "nnsight.trace")
    throw LoadError(what + ": not an nnsight trace result (metadata 'format' is not 'nnsight.trace')");
  std::vector<RequestOutput> outputs;
  try {
    const nlohmann::json prompts = field("prompts"), texts = field("texts"), outs = field("outputs");
    for (size_t i = 0; i < outs.size(); ++i) {
      RequestOutput o;
      o.prompt = i < prompts.size() ? prompts[i].get<std::string>() : "";
      o.text = i < texts.size() ? texts[i].get<std::string>() : "";
      o.prompt_token_ids = outs[i].at("prompt_token_ids").get<std::vector<int32_t>>();
      o.token_ids = outs[i].at("token_ids").get<std::vector<int32_t>>();
      o.finish_reason = finish_reason_from(outs[i].at("finish_reason").get<std::string>());
      o.finished = true;
      outputs.push_back(std::move(o));
    }
    std::map<std::string, SavedValue> saves;
    const nlohmann::json lists = field("lists");
    std::map<std::string, bool> in_list;
    for (auto it = lists.begin(); it != lists.end(); ++it) {
      const size_t n = it.value().get<size_t>();
      if (n > file.tensors().size() + (1u << 20)) throw LoadError(what + ": list '" + it.key() + "' is too long");
      std::vector<at::Tensor> items(n);
      for (size_t i = 0; i < n; ++i) {
        const std::string item = list_item_name(it.key(), i, n);
        if (file.find(item)) {
          items[i] = file.load(item);
          in_list[item] = true;
        }
      }
      saves[it.key()] = SavedValue::of_list(std::move(items));
    }
    for (const auto& t : file.tensors())
      if (!in_list.count(t.name)) saves[t.name] = SavedValue(file.load(t.name));
    return TraceResult(std::move(outputs), std::move(saves));
  } catch (const nlohmann::json::exception& e) {
    throw LoadError(what + ": malformed trace result metadata: " + e.what());
  }
}

}  // namespace nnsight::tracing
