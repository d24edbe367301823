// The engine behind a public nnsight::LLM, for the layers built on it
// (tracing, the CLI); not part of the public API.
#pragma once

#include <nnsight/llm.hpp>

#include "runner/engine/async_engine.h"

namespace nnsight::runner {

struct LLMAccess {
  static AsyncEngine& engine(LLM& llm) { return *llm.engine_; }
};

}  // namespace nnsight::runner
