// Where tests find the default real model (RealModel* suites).
#pragma once

#include <string>

namespace nnsight {
namespace testing {

// $NNSIGHT_HOME (default $HOME/.cache/nnsight) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf".
// Suites that use it must fail, not skip, when the file is missing.
std::string default_model_path();

}  // namespace testing
}  // namespace nnsight
