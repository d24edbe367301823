// EngineFailure: how a request's error says that the engine failed under it
// (its workers died, a step threw, it shut down) rather than that the request
// asked for something that cannot run. A server answers the first with 5xx,
// the second with 4xx.
#pragma once

#include <string>

namespace nnsight::runner {

// Prefixes of the errors Engine::fail_all hands every live request.
inline constexpr const char* kWorkersFailed = "the engine's workers failed: ";
inline constexpr const char* kStepFailed = "engine step failed: ";
inline constexpr const char* kEngineShutDown = "the engine shut down before the request finished";

inline bool is_engine_failure(const std::string& error) {
  for (const char* prefix : {kWorkersFailed, kStepFailed, kEngineShutDown})
    if (error.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace nnsight::runner
