// TraceRecorder: the state of one trace while its body runs in the user's
// thread -- one graph builder per invoke (plus auxiliary ones), the step
// cursor of every envoy, the iteration nesting -- and, at the end, the
// requests that carry the recorded graphs to the engine.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nnsight/proxy.hpp>
#include <nnsight/sampling_params.hpp>
#include <nnsight/source_location.hpp>

#include "dsl/builder.h"
#include "runner/engine/engine.h"
#include "runner/model_runner/model_structure.h"

namespace nnsight::tracing {

class TraceRecorder {
 public:
  // `edits`: the persistent edits (LanguageModel::edit) the trace runs first,
  // as its invokes 0..edits.size()-1 (front/trace_worker/persistent_edits.h).
  TraceRecorder(const runner::ModelStructure& structure, SamplingParams params, uint64_t trace_id,
                std::vector<dsl::Graph> edits = {});

  struct Invoke {
    std::shared_ptr<dsl::GraphBuilder> builder;
    std::vector<std::shared_ptr<dsl::GraphBuilder>> auxiliary;  // cache recorders
    bool has_prompt = false;
    // One request per prompt (text, or token ids when given): usually one;
    // an invoke with several prompts runs its graph over all of them.
    std::vector<std::string> prompts;
    std::vector<std::vector<int32_t>> prompts_token_ids;
    SamplingParams params;
    // Step cursors: one frame outside iterations, one per open iteration.
    std::vector<std::map<std::string, int64_t>> cursors{1};
    int64_t iter_depth = 0;
  };

  // The recorder of the trace body running on this thread, or null.
  static TraceRecorder* current();
  class Scope {
   public:
    explicit Scope(TraceRecorder* r);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TraceRecorder* prev_;
  };

  // Opens an invoke (prompt or token ids; neither = promptless), runs `body`
  // with it current, and closes it.
  void run_invoke(bool has_prompt, std::string prompt, std::vector<int32_t> ids, const SamplingParams& params,
                  const std::function<void()>& body, const SourceLoc& loc);
  // An invoke with several prompts: texts, or token ids (the other list empty).
  void run_invoke(std::vector<std::string> prompts, std::vector<std::vector<int32_t>> ids, const SamplingParams& params,
                  const std::function<void()>& body, const SourceLoc& loc);
  bool in_invoke() const { return open_ >= 0; }
  Invoke& invoke(const SourceLoc& loc);  // the open one; TraceError if none
  std::shared_ptr<dsl::GraphBuilder> builder(const SourceLoc& loc) { return invoke(loc).builder; }

  // The step a read of `cursor_key` ("<path>" / "logits" / "samples") addresses now.
  dsl::StepSpec step_for(const std::string& cursor_key, const SourceLoc& loc);
  void advance(const std::string& cursor_key, const SourceLoc& loc);
  void push_iteration(const SourceLoc& loc);
  void pop_iteration(const SourceLoc& loc);
  dsl::NodeId node_of(const Operand& operand, const SourceLoc& loc);

  const runner::ModelStructure& structure() const { return structure_; }
  const SamplingParams& params() const { return params_; }
  uint64_t trace_id() const { return trace_id_; }
  int next_cache_id() { return cache_count_++; }

  // Finishes every graph, runs the static checks, and builds one request per
  // invoke with a prompt. Throws TraceError.
  std::vector<runner::RequestInput> finish(const SourceLoc& loc);
  // The graph of an edit's body: one invoke without a prompt, checked as an
  // edit (no saves, no cache). Throws TraceError.
  dsl::Graph finish_edit(const SourceLoc& loc);

 private:
  const runner::ModelStructure& structure_;
  SamplingParams params_;
  uint64_t trace_id_;
  std::vector<dsl::Graph> edits_;
  std::vector<Invoke> invokes_;
  int64_t open_ = -1;
  int cache_count_ = 0;
};

}  // namespace nnsight::tracing
