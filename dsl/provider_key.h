// Provider keys: the names of the values a graph can get or set.
//   "<module path>.output"  a module's output (tensor or tuple of tensors)
//   "<module path>.input"   its first positional input (tensor)
//   "<module path>.inputs"  all its positional inputs (tuple)
//   "<module path>.skip"    set only: the module's output for these rows, in
//                           place of running it (set before it runs)
//   "logits"                the logits row(s) before sampling
//   "samples"               the sampled token ids
//   "result"                the finished request's output
// A module path is dot-separated segments of [A-Za-z0-9_], as Hugging Face
// names modules ("model.layers.3.mlp").
#pragma once

#include "dsl/value_kind.h"

#include <optional>
#include <string>
#include <string_view>

namespace nnsight::dsl {

enum class KeyKind : uint8_t { ModuleOutput, ModuleInput, ModuleInputs, Logits, Samples, Result, ModuleSkip };

struct ProviderKey {
  KeyKind kind;
  std::string_view module_path;  // empty for logits/samples/result; points into the parsed string
};

// nullopt when `key` is not of one of the forms above.
std::optional<ProviderKey> parse_provider_key(std::string_view key);
// The kinds a value of that key may have (for static checks).
KindMask provider_key_kinds(KeyKind kind);

}  // namespace nnsight::dsl
