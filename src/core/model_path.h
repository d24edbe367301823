// Model names and paths: "smollm2-135m" (the default model, fetched by
// scripts/setup into $NNSIGHT_HOME/models), a .gguf file, or a Hugging Face
// directory.
#pragma once

#include <string>
#include <vector>

namespace nnsight {

// $NNSIGHT_HOME, else $XDG_CACHE_HOME/nnsight, else ~/.cache/nnsight.
std::string nnsight_home();

// The names resolve_model_path knows.
std::vector<std::string> known_model_names();

// A known name's file, or the path itself if it exists. Throws LoadError
// ("unknown model ...") otherwise, or when a known model is not fetched yet.
std::string resolve_model_path(const std::string& name_or_path);

}  // namespace nnsight
