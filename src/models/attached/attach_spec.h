// "NAME=FILE@HOOK_POINT" (EngineArgs::attach, --attach): which module to
// load from which file and attach to which hook point, under which path.
#pragma once

#include <string>
#include <vector>

namespace nnsight {

class CausalLM;

struct AttachSpec {
  std::string name;        // its module path ("sae_l3")
  std::string file;        // an SAELens directory or a .safetensors file
  std::string hook_point;  // the model's module it runs on ("model.layers.3")
};

// Splits at the first '=' and the last '@'. Throws ConfigError quoting the
// spec when a part is missing.
AttachSpec parse_attach_spec(const std::string& spec);

// Loads and attaches each spec, in order (attached_file.h, attached_module.h).
void attach_all(CausalLM& model, const std::vector<std::string>& specs);

}  // namespace nnsight
