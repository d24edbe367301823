// The public LLM front of the engine (include/nnsight/llm.hpp).
#include <nnsight/error.hpp>
#include <nnsight/llm.hpp>

#include "runner/engine/async_engine.h"

namespace nnsight {

LLM::LLM(const EngineArgs& args) {
  args.validate();
  engine_ = std::make_unique<runner::AsyncEngine>(std::make_unique<runner::Engine>(args));
}

LLM::~LLM() = default;

LLM::Handle LLM::submit(const std::string& prompt, const SamplingParams& params, StreamCallback on_update) {
  runner::RequestInput in;
  in.prompt = prompt;
  in.params = params;
  auto h = engine_->submit(std::move(in), std::move(on_update));
  return Handle{h.id, h.result};
}

LLM::Handle LLM::submit(const std::vector<int32_t>& ids, const SamplingParams& params, StreamCallback on_update) {
  if (ids.empty()) throw ConfigError("submit: prompt_token_ids is empty");
  runner::RequestInput in;
  in.prompt_token_ids = ids;
  in.params = params;
  auto h = engine_->submit(std::move(in), std::move(on_update));
  return Handle{h.id, h.result};
}

void LLM::abort(uint64_t id) { engine_->abort(id); }

std::vector<RequestOutput> LLM::generate(const std::vector<std::string>& prompts, const SamplingParams& params) {
  params.validate();
  std::vector<Handle> handles;
  handles.reserve(prompts.size());
  for (const auto& p : prompts) handles.push_back(submit(p, params));
  std::vector<RequestOutput> out;
  out.reserve(handles.size());
  for (auto& h : handles) out.push_back(h.result.get());
  return out;
}

RequestOutput LLM::generate(const std::string& prompt, const SamplingParams& params) {
  return generate(std::vector<std::string>{prompt}, params).front();
}

std::vector<int32_t> LLM::encode(const std::string& text, bool add_special_tokens) const {
  if (!engine_->tokenizer()) throw Error("this model has no tokenizer");
  return engine_->tokenizer()->encode(text, add_special_tokens);
}

std::string LLM::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  if (!engine_->tokenizer()) throw Error("this model has no tokenizer");
  return engine_->tokenizer()->decode(ids, skip_special_tokens);
}

}  // namespace nnsight
