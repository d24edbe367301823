#include "models/attached/attach_spec.h"

#include <nnsight/error.hpp>

#include "models/attached/attached_file.h"
#include "models/attached/attached_module.h"
#include "models/causal_lm.h"

namespace nnsight {

AttachSpec parse_attach_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  const size_t at = spec.rfind('@');
  if (eq == std::string::npos || at == std::string::npos || at < eq || eq == 0 || at == eq + 1 || at + 1 == spec.size())
    throw ConfigError("attach '" + spec + "': expected NAME=FILE@HOOK_POINT (e.g. sae_l3=/saes/l3@model.layers.3)");
  return AttachSpec{spec.substr(0, eq), spec.substr(eq + 1, at - eq - 1), spec.substr(at + 1)};
}

void attach_all(CausalLM& model, const std::vector<std::string>& specs) {
  for (const std::string& s : specs) {
    AttachSpec spec = parse_attach_spec(s);
    attach_module(model, spec.name, load_attached_module(spec.file), spec.hook_point);
  }
}

}  // namespace nnsight
