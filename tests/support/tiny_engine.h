// Engines over tiny random models, in process (no files, no tokenizer).
#pragma once

#include <memory>

#include <nnsight/engine_args.hpp>

#include "models/causal_lm.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/model_runner.h"

namespace nnsight::testing {

// A tiny random Llama (seeded) shared by the tests that build engines.
std::shared_ptr<CausalLM> tiny_llama(uint64_t seed = 11);

// An Engine running `model` in process with `args`' budgets.
std::unique_ptr<runner::Engine> tiny_engine(const EngineArgs& args, std::shared_ptr<CausalLM> model);

// The same, with its model runner in view (what the runner counts, such as
// the decode graphs' replays); the engine owns the runner.
struct EngineAndRunner {
  std::unique_ptr<runner::Engine> engine;
  const runner::ModelRunner* runner = nullptr;
};
EngineAndRunner tiny_engine_with_runner(const EngineArgs& args, std::shared_ptr<CausalLM> model);

// Runs the engine until every request finished; returns final outputs by id.
std::map<uint64_t, RequestOutput> run_to_completion(runner::Engine& engine);

}  // namespace nnsight::testing
