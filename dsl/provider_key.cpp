#include "dsl/provider_key.h"

namespace nnsight::dsl {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool valid_module_path(std::string_view p) {
  if (p.empty()) return false;
  bool segment_empty = true;
  for (char c : p) {
    if (c == '.') {
      if (segment_empty) return false;
      segment_empty = true;
      continue;
    }
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
    segment_empty = false;
  }
  return !segment_empty;
}

}  // namespace

std::optional<ProviderKey> parse_provider_key(std::string_view key) {
  if (key == "logits") return ProviderKey{KeyKind::Logits, {}};
  if (key == "samples") return ProviderKey{KeyKind::Samples, {}};
  if (key == "result") return ProviderKey{KeyKind::Result, {}};
  struct Suffix {
    std::string_view text;
    KeyKind kind;
  };
  constexpr Suffix suffixes[] = {{".output", KeyKind::ModuleOutput},
                                 {".inputs", KeyKind::ModuleInputs},
                                 {".input", KeyKind::ModuleInput},
                                 {".skip", KeyKind::ModuleSkip}};
  for (const Suffix& s : suffixes) {
    if (!ends_with(key, s.text)) continue;
    std::string_view path = key.substr(0, key.size() - s.text.size());
    if (!valid_module_path(path)) return std::nullopt;
    return ProviderKey{s.kind, path};
  }
  return std::nullopt;
}

KindMask provider_key_kinds(KeyKind kind) {
  switch (kind) {
    case KeyKind::ModuleOutput:
      return kinds::Tensor | kinds::Tuple;
    case KeyKind::ModuleInput:
    case KeyKind::ModuleSkip:
      return kinds::Tensor;
    case KeyKind::ModuleInputs:
      return kinds::Tuple;
    case KeyKind::Logits:
    case KeyKind::Samples:
      return kinds::Tensor;
    case KeyKind::Result:
      return kinds::Any;
  }
  return kinds::Any;
}

}  // namespace nnsight::dsl
