#include "runner/model_runner/model_runner.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>

#include "core/gradient_forward.h"
#include "core/kernels/cuda_kernels.h"
#include "core/kernels/kernel_path.h"
#include "core/log.h"
#include "core/kernels/parallel_chunks.h"
#include "runner/model_runner/current_step.h"
#include "tp/collective_error.h"

namespace nnsight::runner {

namespace {
// Untraced requests: no intervention graph (a trace, a generate with a body
// and a persistent edit all travel as one) and no gradients. Nothing reads
// or changes their rows mid-forward, so
//  - under RunnerConfig::fast_untraced their rows may run with 8-bit
//    activations. The prefix cache needs no salt for them: a traced request
//    never reuses cached blocks (the trace policy turns prefix caching off),
//    so every request that does is an 8-bit one;
//  - the logits a CUDA graph replayed (decode_graphs.h) are theirs to
//    read until the next replay; a traced request gets a copy.
bool untraced(const SamplingParams& p) { return p.payload().empty() && !p.gradients(); }
}  // namespace

ModelRunner::ModelRunner(std::shared_ptr<CausalLM> model, RunnerConfig config)
    : model_(std::move(model)),
      config_(config),
      inputs_(config.max_num_batched_tokens, config.max_num_seqs,
              (config.max_model_len + config.block_size - 1) / config.block_size, config.block_size) {
  // CUDA graphs need a decode attention that reads everything from device
  // memory (the CUDA kernels') and no collectives inside the graph.
  const bool on_cuda = model_->options().device().is_cuda();
  // On the CPU with the device path forced (the tests), the same padded
  // buckets run eagerly, reading the host fields a replayed graph would:
  // the whole graph path but the capture, checked without a GPU.
  graphs_emulated_ = model_->options().device().is_cpu() && kernels::device_path_forced();
  const bool graphs = config_.cuda_graphs && model_->parallel().single() && model_->head_dim() <= 256 &&
                      ((on_cuda && kernels::cuda_kernels_built()) || graphs_emulated_);
  // With graphs, one more block than the block manager hands out: the
  // padding rows' scratch block.
  kv_ = allocate_kv_caches(model_->num_layers(), config_.num_blocks + (graphs ? 1 : 0), config_.block_size,
                           model_->local_kv_heads(), model_->head_dim(), model_->options());
  structure_ = ModelStructure::probe(*model_, kv_);
  if (graphs) {
    graphs_ = std::make_unique<DecodeGraphs>(
        *model_, kv_,
        DecodeGraphOptions()
            .rows(config_.max_num_seqs)
            .blocks_per_seq((config_.max_model_len + config_.block_size - 1) / config_.block_size)
            .block(config_.block_size)
            .scratch(static_cast<int32_t>(config_.num_blocks))
            .context(config_.max_model_len)
            .captured(on_cuda)
            .as_replayed(!on_cuda));
    for (const auto& [name, m] : model_->named_hookable_modules()) hookable_.push_back(m);
    // At start, as vLLM does: no early step pays for its bucket's capture
    // (on the CPU with the device path forced, the same warm-up forwards on
    // padding rows). A graph without hooks stays valid whatever extensions
    // attach later: a step with hooks never replays it.
    try {
      graphs_->make_all();
    } catch (const std::exception& e) {
      log_warning(std::string("CUDA graphs off for this engine, every step runs eager: ") + e.what());
      graphs_.reset();
    }
  }
}

void ModelRunner::add_observer(std::shared_ptr<StepObserver> observer) { observers_.push_back(std::move(observer)); }

StepContext ModelRunner::context() const {
  StepContext ctx;
  ctx.step = step_;
  ctx.groups = &inputs_.batch().groups;
  ctx.meta = &meta_device_;
  return ctx;
}

void ModelRunner::fail(uint64_t id, const std::string& message, ModelRunnerOutput& out) {
  if (!failed_.insert(id).second) return;
  FinishedRequest f;
  f.id = id;
  f.reason = FinishReason::kError;
  f.error = message;
  for (auto& o : observers_) {
    try {
      o->on_finished(id, f);
    } catch (const std::exception&) {
      // The request already failed; a second error adds nothing.
    }
  }
  f.saves.clear();  // a failed request returns no partial saves
  states_.erase(id);
  out.finished.push_back(std::move(f));
}

void ModelRunner::finish_request(uint64_t id, FinishReason reason, ModelRunnerOutput& out) {
  FinishedRequest f;
  f.id = id;
  f.reason = reason;
  try {
    for (auto& o : observers_) o->on_finished(id, f);
  } catch (const std::exception& e) {
    f.reason = FinishReason::kError;
    f.error = e.what();
    f.saves.clear();
  }
  states_.erase(id);
  out.finished.push_back(std::move(f));
}

void ModelRunner::collect_observer_errors(ModelRunnerOutput& out) {
  for (auto& o : observers_)
    for (auto& [id, msg] : o->take_errors()) fail(id, msg, out);
}

void ModelRunner::update_states(const SchedulerOutput& step, ModelRunnerOutput& out) {
  failed_.clear();
  for (uint64_t id : step.finished_ids) {
    if (states_.count(id)) finish_request(id, FinishReason::kNone, out);
  }
  for (uint64_t id : step.preempted_ids)
    for (auto& o : observers_) o->on_preempted(id);
  for (const auto& nr : step.new_requests) {
    states_[nr.id] = RequestState{nr.params, nr.seed, static_cast<int64_t>(nr.prompt_token_ids.size())};
    try {
      for (auto& o : observers_) o->on_new_request(nr);
    } catch (const std::exception& e) {
      fail(nr.id, e.what(), out);
    }
  }
}

void ModelRunner::prepare_inputs(const SchedulerOutput& step) {
  scheduled_.clear();
  for (const auto& s : step.scheduled)
    if (!failed_.count(s.id) && states_.count(s.id)) scheduled_.push_back(&s);
  const batching::FlatBatch& batch = inputs_.flatten(scheduled_);
  graph_candidate_ = graphs_ && UseDecodeGraphs::enabled() && graphs_->bucket_for(batch) > 0 && !gradient_step() &&
                     (graphs_emulated_ || kernels::cuda_kernels_for(kv_.front().key));
  if (graph_candidate_) {
    // The graph's bucket uploads the inputs; until then the step's host meta.
    token_ids_device_ = at::Tensor();
    meta_device_ = batch.meta;
  } else {
    upload_eager_inputs();
  }
  mark_int8_rows();
}

void ModelRunner::upload_eager_inputs() {
  const batching::FlatBatch& batch = inputs_.batch();
  const at::Device device = model_->options().device();
  if (device.is_cpu()) {
    token_ids_device_ = batch.token_ids;
    meta_device_ = batch.meta;
  } else {
    if (!uploader_) uploader_ = std::make_unique<batching::BatchUploader>(device);
    batching::DeviceBatch up = uploader_->upload(batch);  // one host-to-device copy
    token_ids_device_ = std::move(up.token_ids);
    meta_device_ = std::move(up.meta);
  }
}

bool ModelRunner::all_untraced() const {
  for (const auto& r : groups())
    if (!untraced(states_.at(r.id).params)) return false;
  return true;
}

bool ModelRunner::hooks_for_graph(const StepContext& ctx, HookedModules& hooked) const {
  hooked.clear();
  size_t hooks = 0;
  for (Module* m : hookable_) {
    if (!m->has_hooks()) continue;
    hooks += m->num_hooks();
    hooked.push_back(HookedModule{m, m->has_pre_hooks(), m->has_forward_hooks()});
  }
  if (hooks == 0) return true;
  if (tapped_graphs_off_) return false;
  // Each hook must be one its owner may run after the forward.
  size_t deferrable = 0;
  for (const auto& o : observers_) deferrable += o->deferrable_hooks(ctx);
  return deferrable == hooks && graphs_->can_run(inputs_.batch(), hooked);
}

at::Tensor ModelRunner::run_decode_graph(const HookedModules& hooked) {
  try {
    DecodeGraphs::Step s = graphs_->run(inputs_.batch(), hooked);
    token_ids_device_ = std::move(s.token_ids);
    meta_device_ = std::move(s.meta);
    return s.logits;
  } catch (const GraphUnavailable& e) {
    if (!hooked.empty()) {
      log_warning(std::string("CUDA graphs with deferred hooks off for this engine, traced steps run eager: ") +
                  e.what());
      tapped_graphs_off_ = true;
      return at::Tensor();
    }
    // A model whose forward cannot be captured (a host synchronization, a
    // shape that depends on values) runs eager from here on.
    log_warning(std::string("CUDA graphs off for this engine, every step runs eager: ") + e.what());
    graphs_.reset();
    graph_candidate_ = false;
    return at::Tensor();
  }
}

void ModelRunner::mark_int8_rows() {
  int8_tokens_ = kernels::Int8Rows{};
  int8_samples_ = kernels::Int8Rows{};
  if (!config_.fast_untraced || groups().empty()) return;
  // Rows nobody owns stay exact.
  const batching::BatchMeta& meta = inputs_.batch().meta;
  int8_token_flags_.assign(static_cast<size_t>(meta.num_tokens), 0);
  int8_sample_flags_.assign(static_cast<size_t>(meta.logits_rows.size(0)), 0);
  for (const auto& r : groups()) {
    if (!untraced(states_.at(r.id).params)) continue;
    std::fill_n(int8_token_flags_.begin() + r.token_start, r.num_tokens, uint8_t(1));
    if (r.samples()) int8_sample_flags_[static_cast<size_t>(r.sample_row)] = 1;
  }
  int8_tokens_ = kernels::Int8Rows::of(int8_token_flags_);
  int8_samples_ = kernels::Int8Rows::of(int8_sample_flags_);
}

at::Tensor ModelRunner::forward() {
  const kernels::Int8RowsScope rows(int8_tokens_.none() ? nullptr : &int8_tokens_);
  return model_->forward(token_ids_device_, meta_device_, kv_);
}

at::Tensor ModelRunner::compute_logits(const at::Tensor& hidden) {
  const kernels::Int8RowsScope rows(int8_samples_.none() ? nullptr : &int8_samples_);
  return model_->compute_logits(hidden, meta_device_.logits_rows);
}

at::Tensor ModelRunner::sample(const at::Tensor& logits, ModelRunnerOutput& out) {
  std::vector<SamplingRow> rows;
  rows.reserve(static_cast<size_t>(logits.size(0)));
  for (const auto& r : groups()) {
    if (r.sample_row < 0) continue;
    const RequestState& st = states_.at(r.id);
    SamplingRow row;
    row.temperature = st.params.temperature();
    row.top_p = st.params.top_p();
    row.top_k = st.params.top_k();
    row.min_p = st.params.min_p();
    row.seed = st.seed;
    row.step = r.num_generated;
    row.logprobs = st.params.logprobs() ? *st.params.logprobs() : -1;
    rows.push_back(row);
  }
  SamplerOutput s = runner::sample(logits, rows);
  size_t k = 0;
  out.sampled.reserve(rows.size());
  for (const auto& r : groups()) {
    if (r.sample_row < 0) continue;
    SampledToken t;
    t.id = r.id;
    t.has_logprobs = rows[k].logprobs >= 0;
    if (t.has_logprobs) t.logprobs = s.logprobs[k];
    out.sampled.push_back(std::move(t));
    ++k;
  }
  return s.tokens;
}

void ModelRunner::finish(const at::Tensor& tokens, ModelRunnerOutput& out) {
  std::set<uint64_t> stopped;
  for (auto& o : observers_)
    for (uint64_t id : o->take_stopped()) stopped.insert(id);
  const auto* tok = tokens.data_ptr<int64_t>();
  const ModelConfig& model_config = model_->config();
  size_t k = 0;
  std::vector<SampledToken> kept;
  kept.reserve(out.sampled.size());
  for (const auto& r : groups()) {
    if (r.sample_row < 0) continue;
    SampledToken t = out.sampled[k++];
    t.token = static_cast<int32_t>(tok[r.sample_row]);
    if (t.has_logprobs) t.logprobs.token = t.token;
    if (failed_.count(r.id)) continue;
    const RequestState& st = states_.at(r.id);
    const int64_t generated = r.num_generated + 1;
    const int64_t total = st.prompt_len + generated;
    FinishReason reason = FinishReason::kNone;
    const auto& stops = st.params.stop_token_ids();
    if ((!st.params.ignore_eos() && model_config.is_eos(t.token)) ||
        std::find(stops.begin(), stops.end(), t.token) != stops.end()) {
      reason = FinishReason::kStop;
    } else if (generated >= st.params.max_tokens() || total >= config_.max_model_len) {
      reason = FinishReason::kLength;
    } else if (stopped.count(r.id)) {
      reason = FinishReason::kStop;
    }
    kept.push_back(t);
    if (reason != FinishReason::kNone) finish_request(r.id, reason, out);
  }
  out.sampled = std::move(kept);
}

bool ModelRunner::gradient_step() const {
  // The scheduler never mixes the two kinds: the first request tells.
  return !groups().empty() && states_.at(groups().begin()->id).params.gradients();
}

ModelRunnerOutput ModelRunner::execute(const SchedulerOutput& step) {
  // The whole step (forward, logits, sampling) uses the kernels' pool only
  // (parallel_chunks.h): OpenMP's worker, spinning after the sampler's
  // operators on [batch, vocab] logits, held the core the pool's worker
  // needed in the next forward (batch-8 decode about 15 % slower).
  const kernels::SerialLibTorchScope serial;
  ModelRunnerOutput out;
  out.step = step.step;
  step_ = step.step;
  update_states(step, out);
  prepare_inputs(step);
  if (groups().empty()) return out;
  const StepContext ctx = context();
  ScopedCurrentStep current(&ctx);
  try {
    // Requests that asked for gradients run in steps of their own (the
    // scheduler keeps them apart), recording an autograd graph.
    std::optional<GradientForward> gradients;
    if (gradient_step()) {
      gradients.emplace();
      // Autograd saves the token ids and row indices some ops take, and
      // cannot save the flattener's buffers (inference tensors): copies.
      token_ids_device_ = token_ids_device_.clone();
      meta_device_ = meta_device_.clone();
    }
    for (auto& o : observers_) o->before_forward(ctx);
    // A graph, where every hook on the model may run after it (none, or a
    // trace's that only read); any other hook keeps the step eager.
    at::Tensor logits;
    if (graph_candidate_ && hooks_for_graph(ctx, hooked_)) {
      logits = run_decode_graph(hooked_);
      // The graph's logits are overwritten by its next replay; a trace may
      // keep what it reads of them for a later step.
      if (logits.defined() && !all_untraced()) logits = logits.clone();
    }
    if (logits.defined()) {
      for (auto& o : observers_) o->after_forward(ctx);
    } else {
      if (!token_ids_device_.defined()) upload_eager_inputs();
      at::Tensor hidden = forward();
      for (auto& o : observers_) o->after_forward(ctx);
      logits = compute_logits(hidden);
    }
    for (auto& o : observers_) o->on_logits(ctx, logits);
    at::Tensor tokens = sample(gradients ? logits.detach() : logits, out);
    for (auto& o : observers_) o->on_samples(ctx, tokens);
    collect_observer_errors(out);
    finish(tokens.to(at::kCPU, at::kLong).contiguous(), out);
  } catch (const tp::CollectiveError&) {
    throw;  // the tensor-parallel group is broken: no later step can run
  } catch (const std::exception& e) {
    // The step itself failed (not one request's intervention): every request
    // in it ends with the error; the engine keeps serving.
    out.sampled.clear();
    for (const auto& r : groups()) fail(r.id, std::string("step failed: ") + e.what(), out);
  }
  return out;
}

}  // namespace nnsight::runner
