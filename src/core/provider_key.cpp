#include "core/provider_key.h"

namespace nnsight {
namespace {

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

struct Suffix {
  std::string_view text;
  KeyKind kind;
};
constexpr Suffix kSuffixes[] = {{".output", KeyKind::ModuleOutput},
                                {".inputs", KeyKind::ModuleInputs},
                                {".input", KeyKind::ModuleInput},
                                {".skip", KeyKind::ModuleSkip}};

}  // namespace

std::string ProviderKey::str() const {
  switch (kind) {
    case KeyKind::Logits:
      return "logits";
    case KeyKind::Samples:
      return "samples";
    case KeyKind::Result:
      return "result";
    default:
      break;
  }
  for (const Suffix& s : kSuffixes)
    if (s.kind == kind) return module_path + std::string(s.text);
  return module_path;
}

std::optional<ProviderKey> parse_provider_key(std::string_view key) {
  if (key == "logits") return ProviderKey{KeyKind::Logits, {}};
  if (key == "samples") return ProviderKey{KeyKind::Samples, {}};
  if (key == "result") return ProviderKey{KeyKind::Result, {}};
  for (const Suffix& s : kSuffixes) {
    if (key.size() < s.text.size() || key.substr(key.size() - s.text.size()) != s.text) continue;
    std::string_view path = key.substr(0, key.size() - s.text.size());
    if (!valid_module_path(path)) return std::nullopt;
    return ProviderKey{s.kind, std::string(path)};
  }
  return std::nullopt;
}

}  // namespace nnsight
