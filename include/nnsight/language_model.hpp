// LanguageModel: a served model you can trace. It owns an engine (the
// worker processes too, for multi-process executors), the tokenizer and the
// model's module tree.
//
//   LanguageModel lm(EngineArgs().model("smollm2-135m"));
//   Saved logits;
//   TraceResult out = lm.trace("The Eiffel Tower is located in the city of",
//                              SamplingParams().temperature(0).max_tokens(1),
//                              [&](Tracer& t) { logits = lm.logits().save(); });
//   at::Tensor l = out[logits];  // [1, vocab]
//
// The body runs once, in the calling thread, and records an intervention
// graph per invoke; the graphs travel with the requests and run next to the
// model. trace() blocks; submit() returns a future (any thread may call it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nnsight/engine_args.hpp>
#include <nnsight/envoy.hpp>
#include <nnsight/request_output.hpp>
#include <nnsight/sampling_params.hpp>
#include <nnsight/saved.hpp>
#include <nnsight/scan_result.hpp>
#include <nnsight/tracer.hpp>

namespace nnsight {

class LLM;

// The outcome of a trace: each invoke's output, and the saved values.
class TraceResult {
 public:
  TraceResult() = default;
  TraceResult(std::vector<RequestOutput> outputs, std::map<std::string, SavedValue> saves)
      : outputs_(std::move(outputs)), saves_(std::move(saves)) {}

  // A saved tensor (numbers as 0-d tensors). Throws nnsight::Error when the
  // save never ran or holds a list.
  at::Tensor operator[](const Saved& saved) const;
  // A saved list (save_each, tuples such as an attention output).
  std::vector<at::Tensor> list(const Saved& saved) const;
  const SavedValue& value(const Saved& saved) const;
  bool has(const Saved& saved) const { return saves_.count(saved.name()) > 0; }
  // Every step's output of each cached module, by path.
  std::map<std::string, std::vector<at::Tensor>> cache(const CacheHandle& handle) const;

  // One output per prompt, in invoke order (an invoke with several prompts
  // has one per prompt, in its order).
  const std::vector<RequestOutput>& outputs() const { return outputs_; }
  const RequestOutput& output(size_t prompt = 0) const;
  const std::string& text(size_t prompt = 0) const { return output(prompt).text; }
  const std::map<std::string, SavedValue>& saves() const { return saves_; }

 private:
  std::vector<RequestOutput> outputs_;
  std::map<std::string, SavedValue> saves_;
};

// A submitted trace. Its result arrives through a real future: wait_for()
// answers `timeout` while the trace runs and `ready` once it is done.
// cancel() aborts the trace's requests; get() then throws nnsight::TraceError
// (a trace that already finished keeps its result). Use it while the
// LanguageModel that made it lives.
class TraceFuture {
 public:
  TraceFuture() = default;
  // `interrupts_at`: nnsight::request_interrupt()'s count when the trace was
  // submitted; a later interrupt cancels it while get()/wait() waits.
  TraceFuture(std::future<TraceResult> future, std::function<void()> cancel, uint64_t interrupts_at = 0)
      : future_(std::move(future)), cancel_(std::move(cancel)), interrupts_at_(interrupts_at) {}

  // Throws nnsight::Interrupted when request_interrupt() was called while it
  // waited (the trace's requests are aborted first).
  TraceResult get();
  bool valid() const { return future_.valid(); }
  void wait() const;
  template <class Rep, class Period>
  std::future_status wait_for(const std::chrono::duration<Rep, Period>& d) const {
    return future_.wait_for(d);
  }
  void cancel() const {
    if (cancel_) cancel_();
  }
  // The plain std::future (to keep it in a container of them).
  operator std::future<TraceResult>() && { return std::move(future_); }

 private:
  std::future<TraceResult> future_;
  std::function<void()> cancel_;
  uint64_t interrupts_at_ = 0;
};

// The served model's hyper-parameters (what its config.json or GGUF metadata
// say), as the engine read them.
struct ModelConfigInfo {
  std::string architecture;  // "llama", "gemma2", "mixtral", ...
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position = 0;  // positions the model supports
  double norm_eps = 0.0;     // its norms' epsilon
  double rope_theta = 0.0;
  int64_t num_experts = 0;  // MoE: experts per layer (0: dense)
  int64_t num_experts_per_token = 0;
  int64_t sliding_window = 0;        // 0: none
  double final_logit_softcap = 0.0;  // 0: none
  bool tie_word_embeddings = false;
};

class LanguageModel {
 public:
  using Body = std::function<void(Tracer&)>;

  explicit LanguageModel(const EngineArgs& args = EngineArgs());
  ~LanguageModel();
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;
  // Envoys made from a model name it by address: make them again after a move.
  LanguageModel(LanguageModel&&) noexcept;
  LanguageModel& operator=(LanguageModel&&) noexcept;

  // A trace of one prompt (the body's reads and writes belong to it).
  TraceResult trace(const std::string& prompt, const SamplingParams& params, const Body& body,
                    CallSite site = CallSite());
  TraceResult trace(const std::vector<int32_t>& prompt_token_ids, const SamplingParams& params, const Body& body,
                    CallSite site = CallSite());
  // A trace whose body opens its invokes with tracer.invoke(...).
  TraceResult trace(const SamplingParams& params, const Body& body, CallSite site = CallSite());
  // generate: the same as trace (NNsight's name when several tokens are produced).
  TraceResult generate(const std::string& prompt, const SamplingParams& params, const Body& body,
                       CallSite site = CallSite());
  TraceResult generate(const SamplingParams& params, const Body& body, CallSite site = CallSite());

  // Records the body now (in this thread) and returns at once; the result
  // arrives through the future. Static errors are thrown here.
  TraceFuture submit(const std::string& prompt, const SamplingParams& params, const Body& body,
                     CallSite site = CallSite());
  TraceFuture submit(const std::vector<int32_t>& prompt_token_ids, const SamplingParams& params, const Body& body,
                     CallSite site = CallSite());
  TraceFuture submit(const SamplingParams& params, const Body& body, CallSite site = CallSite());

  // ---- persistent edits (NNsight's model.edit; docs/edits.md)
  // Records `body` now, once, as an invoke without a prompt of its own (it
  // sees every prompt's rows; its reads and writes address the prefill step
  // unless inside t.all()/t.iter(), as in a trace body), checks it, and
  // returns a model sharing this one's engine whose every later trace,
  // generate and submit runs this model's edits and then this one before the
  // trace's own interventions. This model stays as it is (NNsight's
  // `with model.edit() as edited:`). An edit cannot save (nor cache): save in
  // the trace. Throws TraceError for what a trace body's checks refuse.
  LanguageModel edit(const Body& body, CallSite site = CallSite()) const;
  // The same on this model itself (NNsight's model.edit(inplace=True)).
  void edit_inplace(const Body& body, CallSite site = CallSite());
  // Removes this model's edits (models edit() made keep theirs).
  void clear_edits();
  size_t num_edits() const;

  // ---- scan (NNsight's model.scan; docs/scan.md)
  // Records the body as trace() would (with this model's edits) and reports
  // the shape and dtype of every value it touches, without running the
  // model: the graphs run on meta tensors with the shapes the engine probed
  // at start-up. Throws TraceError for what trace() would refuse before
  // running, and for the shape errors a run would meet.
  ScanResult scan(const std::string& prompt, const SamplingParams& params, const Body& body,
                  CallSite site = CallSite()) const;
  ScanResult scan(const std::vector<int32_t>& prompt_token_ids, const SamplingParams& params, const Body& body,
                  CallSite site = CallSite()) const;
  ScanResult scan(const SamplingParams& params, const Body& body, CallSite site = CallSite()) const;

  // ---- inside a trace body
  // A module by Hugging Face path. Throws nnsight::TraceError for an unknown
  // path, naming the closest known one.
  Envoy envoy(const std::string& path, CallSite site = CallSite()) const;
  // The logits row [1, vocab] of the current step (before sampling).
  Proxy logits(CallSite site = CallSite()) const;
  // The sampled token [1] of the current step (writable: the engine continues with it).
  Proxy samples(CallSite site = CallSite()) const;

  // ---- the model
  std::vector<std::string> module_paths() const;
  std::string type_name(const std::string& path) const;
  // Whether a trace may run the module on a tensor of its own (envoy(path)(x)).
  bool callable(const std::string& path) const;
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens = true) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  LLM& llm();

  // Its hyper-parameters (eps, sizes, ...).
  ModelConfigInfo config() const;
  // The architecture ("llama", "gpt2") and its number of decoder layers.
  std::string architecture() const;
  int64_t num_layers() const;
  // A parameter of the served model by Hugging Face name ("model.norm.weight",
  // "lm_head.weight"), read from the model file in this process: a float32
  // CPU copy, dequantized (changing it changes nothing in the served model).
  // Throws nnsight::Error naming the parameter when the model has no such one.
  at::Tensor parameter(const std::string& name) const;

 private:
  struct Impl;
  explicit LanguageModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nnsight
