// LLM: the serving engine as a library, vLLM style.
//
//   nnsight::LLM llm(nnsight::EngineArgs().model("smollm2-135m"));
//   auto outs = llm.generate({"The capital of France is"},
//                            nnsight::SamplingParams().temperature(0).max_tokens(8));
//
// generate() blocks; submit() returns at once with a future (and streams
// updates to a callback) and may be called from many threads. One background
// loop drives the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <nnsight/engine_args.hpp>
#include <nnsight/request_output.hpp>
#include <nnsight/sampling_params.hpp>

namespace nnsight {

namespace runner {
class AsyncEngine;
struct LLMAccess;
}  // namespace runner

class LLM {
 public:
  using StreamCallback = std::function<void(const RequestOutput&)>;
  struct Handle {
    uint64_t id = 0;
    std::shared_future<RequestOutput> result;
  };

  explicit LLM(const EngineArgs& args = EngineArgs());
  ~LLM();
  LLM(const LLM&) = delete;
  LLM& operator=(const LLM&) = delete;

  // One output per prompt, in order. Throws ConfigError for bad params.
  std::vector<RequestOutput> generate(const std::vector<std::string>& prompts,
                                      const SamplingParams& params = SamplingParams());
  RequestOutput generate(const std::string& prompt, const SamplingParams& params = SamplingParams());

  Handle submit(const std::string& prompt, const SamplingParams& params, StreamCallback on_update = nullptr);
  Handle submit(const std::vector<int32_t>& prompt_token_ids, const SamplingParams& params,
                StreamCallback on_update = nullptr);
  void abort(uint64_t request_id);

  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens = true) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

 private:
  // The engine, for the layers built on it (tracing): runner/engine/llm_access.h.
  friend struct runner::LLMAccess;
  std::unique_ptr<runner::AsyncEngine> engine_;
};

}  // namespace nnsight
