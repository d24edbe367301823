// Tracer: what a trace body receives. It opens invokes (one request per prompt),
// iterations over generation steps, conditionals, and gives access to the
// values that exist per request rather than per module.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <nnsight/call_site.hpp>
#include <nnsight/proxy.hpp>
#include <nnsight/sampling_params.hpp>

namespace nnsight {

namespace tracing {
class TraceRecorder;
}

// One step of an iteration: `index` is the generation step (0 = prefill).
struct Step {
  Proxy index;
};

// What tracer.cache() recorded: read it from the result with result.cache(handle).
struct CacheHandle {
  std::string prefix;
  std::vector<std::string> modules;
};

class Tracer {
 public:
  explicit Tracer(tracing::TraceRecorder& recorder) : rec_(&recorder) {}

  // An invoke: one prompt, one request; the body's reads and writes see only
  // this prompt's rows. params defaults to the trace's.
  void invoke(const std::string& prompt, const std::function<void()>& body, CallSite site = CallSite());
  void invoke(const std::string& prompt, const SamplingParams& params, const std::function<void()>& body,
              CallSite site = CallSite());
  void invoke(const std::vector<int32_t>& prompt_token_ids, const std::function<void()>& body,
              CallSite site = CallSite());
  void invoke(const std::vector<int32_t>& prompt_token_ids, const SamplingParams& params,
              const std::function<void()>& body, CallSite site = CallSite());
  // An invoke over several prompts (NNsight's tracer.invoke([...])): one graph,
  // one request per prompt. Its reads see its prompts' rows concatenated in
  // prompt order (logits and samples: [k, ...]); writes go back to each
  // prompt's rows. A prompt that finished drops out of later steps'
  // values (docs/invokes.md). A list of one is a plain invoke.
  void invoke(const std::vector<std::string>& prompts, const std::function<void()>& body, CallSite site = CallSite());
  void invoke(const std::vector<std::string>& prompts, const SamplingParams& params, const std::function<void()>& body,
              CallSite site = CallSite());
  void invoke(const std::vector<std::vector<int32_t>>& prompts_token_ids, const std::function<void()>& body,
              CallSite site = CallSite());
  void invoke(const std::vector<std::vector<int32_t>>& prompts_token_ids, const SamplingParams& params,
              const std::function<void()>& body, CallSite site = CallSite());
  // Braced lists: t.invoke({"a", "b"}, body) and t.invoke({{1, 2}, {3}}, body)
  // (without these, {"a", "b"} also matches std::string's iterator-pair constructor).
  template <class S, std::enable_if_t<std::is_convertible_v<const S&, std::string>, int> = 0>
  void invoke(std::initializer_list<S> prompts, const std::function<void()>& body, CallSite site = CallSite()) {
    invoke(std::vector<std::string>(prompts.begin(), prompts.end()), body, site);
  }
  template <class S, std::enable_if_t<std::is_convertible_v<const S&, std::string>, int> = 0>
  void invoke(std::initializer_list<S> prompts, const SamplingParams& params, const std::function<void()>& body,
              CallSite site = CallSite()) {
    invoke(std::vector<std::string>(prompts.begin(), prompts.end()), params, body, site);
  }
  void invoke(std::initializer_list<std::vector<int32_t>> prompts_token_ids, const std::function<void()>& body,
              CallSite site = CallSite()) {
    invoke(std::vector<std::vector<int32_t>>(prompts_token_ids), body, site);
  }
  void invoke(std::initializer_list<std::vector<int32_t>> prompts_token_ids, const SamplingParams& params,
              const std::function<void()>& body, CallSite site = CallSite()) {
    invoke(std::vector<std::vector<int32_t>>(prompts_token_ids), params, body, site);
  }
  // An invoke without a prompt of its own: it sees the rows of every prompt of this trace.
  void invoke(const std::function<void()>& body, CallSite site = CallSite());

  // Runs the body once per generation step in [start, stop) (every `stride`).
  void iter(int64_t start, int64_t stop, const std::function<void(const Step&)>& body, CallSite site = CallSite());
  void iter(int64_t start, int64_t stop, int64_t stride, const std::function<void(const Step&)>& body,
            CallSite site = CallSite());
  // Runs the body at every step until the request finishes.
  void all(const std::function<void(const Step&)>& body, CallSite site = CallSite());
  // ... from step `start` on (NNsight's iter[start:]), every `stride` steps.
  void all(int64_t start, const std::function<void(const Step&)>& body, CallSite site = CallSite());
  void all(int64_t start, int64_t stride, const std::function<void(const Step&)>& body, CallSite site = CallSite());

  // Runs `then` when the condition holds at run time (else `otherwise`).
  void cond(const Operand& condition, const std::function<void()>& then,
            const std::function<void()>& otherwise = nullptr);

  // Ends the request after the current step.
  void stop(CallSite site = CallSite());

  // The generated token ids [n] (available once the request finished).
  Proxy result(CallSite site = CallSite());

  // Saves every step's output of each module (by path) for the current invoke.
  CacheHandle cache(const std::vector<std::string>& modules, CallSite site = CallSite());

 private:
  tracing::TraceRecorder* rec_;
};

}  // namespace nnsight
