// ProviderKey: the typed name of a value a trace can get or set, parsed once
// where a key enters (the graph builder, the JSON and binary decoders, the
// model-structure description) and carried as such. Its text form:
//   "<module path>.output"  a module's output (tensor or tuple of tensors)
//   "<module path>.input"   its first positional input (tensor)
//   "<module path>.inputs"  all its positional inputs (tuple)
//   "<module path>.skip"    set only: the module's output for these rows, in
//                           place of running it (set before it runs)
//   "logits"                the logits row(s) before sampling
//   "samples"               the sampled token ids
//   "result"                the finished request's output
// A module path is dot-separated segments of [A-Za-z0-9_], as Hugging Face
// names modules ("model.layers.3.mlp"). An element of a module's tuple is not
// a key of its own: a graph reads the tuple and takes the element (getitem).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace nnsight {

enum class KeyKind : uint8_t { ModuleOutput, ModuleInput, ModuleInputs, Logits, Samples, Result, ModuleSkip };

struct ProviderKey {
  KeyKind kind = KeyKind::Result;
  std::string module_path;  // empty for logits/samples/result

  static ProviderKey of_module(std::string path, KeyKind kind) { return ProviderKey{kind, std::move(path)}; }
  bool is_module() const { return !module_path.empty(); }
  // The text form ("model.layers.3.output", "logits").
  std::string str() const;

  bool operator==(const ProviderKey& o) const { return kind == o.kind && module_path == o.module_path; }
  bool operator!=(const ProviderKey& o) const { return !(*this == o); }
  bool operator<(const ProviderKey& o) const {
    return module_path != o.module_path ? module_path < o.module_path : kind < o.kind;
  }
  template <typename H>
  friend H AbslHashValue(H h, const ProviderKey& k) {
    return H::combine(std::move(h), k.kind, k.module_path);
  }
};

// nullopt when `key` is not of one of the forms above.
std::optional<ProviderKey> parse_provider_key(std::string_view key);

}  // namespace nnsight
