#include "support/real_model.h"

#include <cstdlib>

namespace nnsight {
namespace testing {

std::string default_model_path() {
  std::string home;
  if (const char* env = std::getenv("NNSIGHT_HOME"); env != nullptr && *env != '\0') {
    home = env;
  } else {
    const char* user_home = std::getenv("HOME");
    home = std::string(user_home != nullptr ? user_home : "") + "/.cache/nnsight";
  }
  return home + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace testing
}  // namespace nnsight
