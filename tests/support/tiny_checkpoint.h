// Writes a model's parameters as a Hugging Face checkpoint directory
// (config.json + model.safetensors), so worker processes and loaders can
// load the very tiny model a test built in memory.
#pragma once

#include <string>

#include "models/causal_lm.h"

namespace nnsight::testing {

// Writes into `dir` (which must exist) and returns it.
std::string write_hf_checkpoint(const std::string& dir, CausalLM& model);

}  // namespace nnsight::testing
