// Evaluator of the Jinja subset (core/jinja): renders a parsed template with
// jinja2's semantics as transformers uses them (undefined values, loop
// scopes, Python's operators and str()). Bounded: a hostile template stops
// with an error after kMaxLoopIterations loop iterations, kMaxSteps
// evaluation steps or kMaxOutputBytes of output (or of any one string).
#pragma once

#include <string>
#include <unordered_map>

#include "core/jinja/jinja_ast.h"

namespace nnsight::jinja {

inline constexpr int64_t kMaxLoopIterations = 1'000'000;
inline constexpr int64_t kMaxSteps = 50'000'000;
inline constexpr size_t kMaxOutputBytes = size_t{64} << 20;
inline constexpr size_t kMaxListSize = 1'000'000;

// The template's global variables (messages, add_generation_prompt, ...).
using Globals = std::unordered_map<std::string, Value>;

// Throws ConfigError: "chat template <line>:<column>: ..." for an evaluation
// error or a limit reached; "chat template: <message>" for raise_exception(message).
std::string render(const Body& body, const Globals& globals);

}  // namespace nnsight::jinja
