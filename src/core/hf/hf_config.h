// ModelConfig from a Hugging Face config.json. model_type llama, mistral and
// qwen2 map to architecture "llama"; gpt2 to "gpt2". Missing optional fields
// take the transformers library's defaults for that model type. Configs as
// transformers 4.x and 5.x write them both load (dtype / torch_dtype,
// rope_parameters / rope_theta + rope_scaling, layer_types /
// sliding_window_pattern, ...); where a file has both spellings they must
// agree. docs/weights.md, "Config spellings".
#pragma once

#include <string>

#include "core/model_config.h"

namespace nnsight {

// `what` names the source in errors ("dir/config.json"). Throws LoadError for
// text that is not a JSON object, an unsupported model_type or rope scaling,
// or a field of the wrong type; the result is validated.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& what);

// Reads and parses `path` (a config.json).
ModelConfig read_hf_config(const std::string& path);

}  // namespace nnsight
