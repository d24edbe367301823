// TraceResult (include/nnsight/language_model.hpp).
#include <nnsight/error.hpp>
#include <nnsight/language_model.hpp>

namespace nnsight {

const SavedValue& TraceResult::value(const Saved& saved) const {
  if (!saved.valid()) {
    throw Error(saved.declared().loc().str() +
                ": this Saved handle is read, but no save was assigned to it (assign it in the trace body: "
                "h = proxy.save())");
  }
  auto it = saves_.find(saved.name());
  if (it == saves_.end())
    throw Error("nothing was saved under '" + saved.name() +
                "' (the save did not run: a branch not taken, "
                "or a step that never came)");
  return it->second;
}

at::Tensor TraceResult::operator[](const Saved& saved) const {
  const SavedValue& v = value(saved);
  if (v.is_list)
    throw Error("'" + saved.name() + "' holds a list of " + std::to_string(v.list.size()) +
                " values (save_each or a tuple): read it with result.list(handle)");
  return v.tensor;
}

std::vector<at::Tensor> TraceResult::list(const Saved& saved) const {
  const SavedValue& v = value(saved);
  if (!v.is_list) return {v.tensor};
  return v.list;
}

std::map<std::string, std::vector<at::Tensor>> TraceResult::cache(const CacheHandle& handle) const {
  std::map<std::string, std::vector<at::Tensor>> out;
  for (const auto& path : handle.modules) {
    auto it = saves_.find(handle.prefix + path);
    out[path] = it == saves_.end() ? std::vector<at::Tensor>{} : it->second.list;
  }
  return out;
}

const RequestOutput& TraceResult::output(size_t prompt) const {
  if (prompt >= outputs_.size())
    throw Error("the trace has " + std::to_string(outputs_.size()) + " prompts; no output " + std::to_string(prompt));
  return outputs_[prompt];
}

}  // namespace nnsight
