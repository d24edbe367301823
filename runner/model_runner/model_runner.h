// ModelRunner: runs one engine step on a worker, in explicit phases:
//   update_states  -> new, finished and preempted requests
//   prepare_inputs -> flat token ids + BatchMeta (persistent buffers)
//   forward        -> final hidden states [T, hidden]
//   compute_logits -> [S, vocab] for the rows that sample
//   sample         -> [S] tokens
//   finish         -> requests that end this step (length, stop token, EOS)
// Observers (StepObserver) attach at each seam.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/kernels/int8_rows.h"
#include "core/kv_cache.h"
#include "models/causal_lm.h"
#include "batching/batch_upload.h"
#include "batching/flattener.h"
#include "runner/model_runner/decode_graphs.h"
#include "runner/model_runner/model_structure.h"
#include "runner/sampling/sampler.h"
#include "runner/step/step_data.h"
#include "runner/model_runner/step_observer.h"

namespace nnsight::runner {

struct RunnerConfig {
  int64_t num_blocks = 1024;              // KV-cache blocks (per layer; one more with CUDA graphs)
  int64_t block_size = 16;                // tokens per block
  int64_t max_num_batched_tokens = 2048;  // flat batch capacity
  int64_t max_num_seqs = 64;              // sequences per step
  int64_t max_model_len = 8192;           // longest sequence
  bool is_driver = true;                  // rank 0: samples are authoritative
  bool fast_untraced = false;             // untraced requests' rows with 8-bit activations
  bool cuda_graphs = false;               // decode steps of untraced requests replay CUDA graphs (CUDA, one rank)
};

class ModelRunner {
 public:
  ModelRunner(std::shared_ptr<CausalLM> model, RunnerConfig config);

  void add_observer(std::shared_ptr<StepObserver> observer);
  ModelRunnerOutput execute(const SchedulerOutput& step);

  CausalLM& model() { return *model_; }
  const ModelStructure& structure() const { return structure_; }
  // The user functions its observers can call (ModelStructure::functions).
  void set_function_names(std::vector<std::string> names) { structure_.set_functions(std::move(names)); }
  const RunnerConfig& config() const { return config_; }
  // The captured decode graphs (null: this runner runs every step eager).
  const DecodeGraphs* decode_graphs() const { return graphs_.get(); }
  std::vector<KVCache>& kv_caches() { return kv_; }

  // ---- phases (public so tests can drive them one by one)
  void update_states(const SchedulerOutput& step, ModelRunnerOutput& out);
  void prepare_inputs(const SchedulerOutput& step);
  at::Tensor forward();
  at::Tensor compute_logits(const at::Tensor& hidden);
  at::Tensor sample(const at::Tensor& logits, ModelRunnerOutput& out);
  void finish(const at::Tensor& tokens, ModelRunnerOutput& out);
  // Whether this step's requests asked for gradients (all or none: the scheduler keeps them apart).
  bool gradient_step() const;

  const batching::BatchGroups& groups() const { return inputs_.batch().groups; }

 private:
  struct RequestState {
    SamplingParams params;
    uint64_t seed = 0;
    int64_t prompt_len = 0;
  };
  void fail(uint64_t id, const std::string& message, ModelRunnerOutput& out);
  void finish_request(uint64_t id, FinishReason reason, ModelRunnerOutput& out);
  void collect_observer_errors(ModelRunnerOutput& out);
  StepContext context() const;

  std::shared_ptr<CausalLM> model_;
  RunnerConfig config_;
  std::vector<KVCache> kv_;
  ModelStructure structure_;
  batching::Flattener inputs_;
  std::vector<std::shared_ptr<StepObserver>> observers_;
  std::unordered_map<uint64_t, RequestState> states_;
  std::set<uint64_t> failed_;  // failed this step: excluded from the batch and from sampling
  uint64_t step_ = 0;
  std::vector<const batching::SeqSlot*> scheduled_;
  at::Tensor token_ids_device_;
  batching::BatchMeta meta_device_;
  std::unique_ptr<batching::BatchUploader> uploader_;
  // RunnerConfig::cuda_graphs (decode_graphs.h). graph_candidate_: this
  // step may replay a graph (a decode step, no gradients; checked again for
  // hooks after the observers' before_forward); its eager inputs are then
  // not uploaded.
  void upload_eager_inputs();
  // The step's logits, or undefined when graphs (with these hooks) just failed.
  at::Tensor run_decode_graph(const HookedModules& hooked);
  // Whether this step may replay a graph with the model's hooks as they
  // are now, which it lists in `hooked` (StepObserver::deferrable_hooks).
  bool hooks_for_graph(const StepContext& ctx, HookedModules& hooked) const;
  bool all_untraced() const;  // no request of the step carries an intervention
  std::unique_ptr<DecodeGraphs> graphs_;
  std::vector<Module*> hookable_;
  HookedModules hooked_;  // reused each step
  bool graph_candidate_ = false;
  bool tapped_graphs_off_ = false;  // a capture with hooked modules failed: such steps run eager
  bool graphs_emulated_ = false;    // the CPU with the device path forced: buckets run eagerly (tests)
  // Under fast_untraced: this step's rows of untraced requests, at token
  // level (the forward) and at prompt level (the logits); see int8_rows.h.
  void mark_int8_rows();
  kernels::Int8Rows int8_tokens_, int8_samples_;
  std::vector<uint8_t> int8_token_flags_, int8_sample_flags_;  // reused each step
};

}  // namespace nnsight::runner
