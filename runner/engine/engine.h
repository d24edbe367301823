// Engine: the serving engine's core loop, one step at a time.
//
//   add_request -> Scheduler (waiting)
//   step():  Scheduler.schedule -> Executor.execute -> Scheduler.update
//            -> detokenize, stop strings -> RequestOutput for every request
//               that changed (cumulative; `finished` on the last one)
//
// Not thread-safe: one thread drives it (AsyncEngine's loop, or the caller).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nnsight/engine_args.hpp>
#include <nnsight/request_output.hpp>
#include <nnsight/sampling_params.hpp>

#include "core/tokenizer/stream_decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "runner/executor/executor.h"
#include "runner/scheduler/scheduler.h"

namespace nnsight::runner {

// One request to add: text (tokenized by the engine) or token ids.
struct RequestInput {
  uint64_t id = 0;     // 0 = the engine assigns one
  std::string prompt;  // used when prompt_token_ids is empty
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
};

class Engine {
 public:
  // Loads the tokenizer and builds the executor (which loads the model).
  explicit Engine(const EngineArgs& args);
  // Uses the given executor; `tokenizer` may be null (token ids only: no
  // text, no stop strings).
  Engine(const EngineArgs& args, std::unique_ptr<Executor> executor, std::shared_ptr<const Tokenizer> tokenizer);
  ~Engine();

  // Validates and queues; returns the request id. Throws ConfigError (bad
  // params, prompt too long) without queuing anything.
  uint64_t add_request(RequestInput input);
  // Queues several requests atomically (all or none), e.g. a trace's invokes.
  std::vector<uint64_t> add_requests(std::vector<RequestInput> inputs);
  bool abort(uint64_t id);

  // One engine step. Returns outputs of requests that changed.
  std::vector<RequestOutput> step();
  bool has_unfinished() const;

  // Fails every unfinished request with `message` (used when the executor broke).
  std::vector<RequestOutput> fail_all(const std::string& message);
  // Times the workers were started again after a failure.
  int64_t worker_restarts() const { return restarts_; }

  const std::shared_ptr<const Tokenizer>& tokenizer() const { return tokenizer_; }
  const ModelConfig& model_config() const { return executor_->model_config(); }
  const ModelStructure& model_structure() const { return executor_->model_structure(); }
  const Scheduler& scheduler() const { return *scheduler_; }
  Executor& executor() { return *executor_; }
  const EngineArgs& args() const { return args_; }
  bool broken() const { return !broken_.empty(); }

 private:
  RequestPtr make_request(RequestInput input);
  void process_text(Request& r, size_t first_new_token);
  RequestOutput snapshot(const Request& r) const;
  SchedulerConfig scheduler_config() const;
  // The executor failed: fails every unfinished request, then starts the
  // workers again (EngineArgs.max_worker_restarts) or stops serving.
  std::vector<RequestOutput> recover(const std::string& failure);

  EngineArgs args_;
  std::unique_ptr<Executor> executor_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<Scheduler> scheduler_;
  uint64_t next_id_ = 1;
  uint64_t next_arrival_ = 0;
  std::unordered_map<uint64_t, RequestPtr> live_;  // not yet reported finished
  std::unordered_map<uint64_t, StreamDecoder> decoders_;
  std::unordered_map<uint64_t, size_t> emitted_tokens_;
  std::vector<uint64_t> to_report_;  // aborted requests whose final output is due
  std::string broken_;               // set once the executor failed for good
  int64_t restarts_ = 0;
};

// Loads the tokenizer stored with a model (GGUF metadata or tokenizer.json).
std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& model_path);

}  // namespace nnsight::runner
