#include "front/trace_worker/interleaver.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>

#include <nnsight/error.hpp>

#include "core/gradient_forward.h"
#include "core/shape_string.h"
#include "dsl/errors.h"
#include "front/trace_worker/admission.h"
#include "front/trace_worker/trace_payload.h"
#include "front/trace_worker/tuple_write.h"

namespace nnsight::tracing {

namespace {

const char* kMissed =
    "Execution complete but `%s` was not provided at step %lld. Did you call an Envoy out of order? "
    "Investigate why this module was not called.";

std::string missed_message(const ProviderKey& key, int64_t step) {
  char buf[512];
  std::snprintf(buf, sizeof buf, kMissed, key.str().c_str(), static_cast<long long>(step));
  return buf;
}

}  // namespace

Interleaver::Interleaver(runner::ModelRunner& runner, const InterleaverOptions& options)
    : runner_(runner),
      admission_{&runner.structure(),         options.limits, options.functions,
                 options.memory_budget_bytes, this,           options.world_size},
      vocab_size_(runner.model().config().vocab_size) {
  if (options.memory_budget_bytes > 0) install_budget_allocator();
  for (auto& [path, m] : runner_.model().named_hookable_modules()) modules_[path] = m;
  attached_ = attached_modules(runner_.model());
}

at::Tensor Interleaver::call_module(const std::string& path, const at::Tensor& x) const {
  auto it = modules_.find(path);
  if (it == modules_.end()) throw Error("unknown module path '" + path + "'");
  Module& m = *it->second;
  if (!m.callable())
    throw Error("module '" + path + "' (" + m.type_name() +
                ") cannot be called in a graph: it needs the step's positions and KV cache");
  // The model's device, and its float dtype for float inputs (token ids stay integers).
  const at::TensorOptions opts = runner_.model().options();
  at::Tensor in =
      at::isFloatingType(x.scalar_type()) ? x.to(opts.device(), opts.dtype().toScalarType()) : x.to(opts.device());
  Module::CallScope no_hooks;
  // Tensor parallelism: this rank's part in, the whole back (every rank runs the same graph).
  if (const TensorSharding* s = m.input_sharding()) in = s->reshard(in);
  at::Tensor y = m.call(in);
  if (const TensorSharding* s = m.output_sharding()) y = s->gather(y);
  return y;
}

Interleaver::~Interleaver() {
  for (auto& [a, h] : splices_) h.remove();
  splices_.clear();
  for (auto& [key, h] : hooks_) h.remove();
  // The points' watch queries call back into this interleaver.
  for (auto& [path, m] : modules_)
    if (auto* point = dynamic_cast<HookPoint*>(m)) point->clear_watch_query();
  hooks_.clear();
  groups_.clear();  // unwinds suspended fibers
}

TraceGroup* Interleaver::group_of(uint64_t request_id) const {
  auto it = trace_of_.find(request_id);
  if (it == trace_of_.end()) return nullptr;
  auto g = groups_.find(it->second);
  return g == groups_.end() ? nullptr : g->second.get();
}

void Interleaver::on_new_request(const runner::NewRequest& nr) {
  if (nr.params.payload().empty()) return;
  const uint64_t trace_id = nr.params.trace_id();
  TraceGroup* g = nullptr;
  try {
    TracePayload p = decode_payload(nr.params.payload(), admission_.limits);
    auto& slot = groups_[trace_id];
    if (!slot) slot = std::make_unique<TraceGroup>(trace_id, p.num_requests, p.num_invokes);
    g = slot.get();
    // The strictest limit any of the trace's requests carries.
    if (const int64_t limit = nr.params.max_saved_bytes(); limit > 0)
      g->max_saved_bytes = g->max_saved_bytes > 0 ? std::min(g->max_saved_bytes, limit) : limit;
    trace_of_[nr.id] = trace_id;
    g->add_request(nr.id, static_cast<uint32_t>(nr.params.invoke_index()), !p.graphs.empty());
    admit_request(nr, std::move(p), *g, admission_);
    if (g->complete()) {
      check_complete_trace(*g, admission_);
      start_group(*g);
    }
  } catch (const std::exception& e) {
    // This request fails through the exception; its trace's other requests with it.
    if (g) {
      const std::string msg = e.what();
      fail_group(*g, msg);
      errors_.erase(std::remove_if(errors_.begin(), errors_.end(),
                                   [&](const std::pair<uint64_t, std::string>& x) { return x.first == nr.id; }),
                    errors_.end());
    }
    throw;
  }
}

void Interleaver::start_group(TraceGroup& g) {
  g.started = true;
  for (auto& m : g.mediators()) m->set_requests(g.requests_of(*m));
  for (size_t i = 0; i < g.mediators().size() && !g.failed; ++i) {
    Mediator& m = *g.mediators()[i];
    m.start();
    after_resume(m, g);
  }
}

void Interleaver::fail_group(TraceGroup& g, const std::string& message) {
  if (g.failed) return;
  g.failed = true;
  for (uint64_t rid : g.requests())
    if (std::find(g.finished().begin(), g.finished().end(), rid) == g.finished().end())
      errors_.emplace_back(rid, message);
}

void Interleaver::after_resume(Mediator& m, TraceGroup& g) {
  if (m.stop_requested())
    for (uint64_t rid : m.requests()) stopped_.insert(rid);
  if (m.state() == Mediator::State::kFailed) fail_group(g, "invoke " + std::to_string(m.invoke()) + ": " + m.error());
}

void Interleaver::sync_hooks() {
  std::set<ProviderKey> wanted;
  for (const auto& [tid, g] : groups_) {
    if (!g->started || g->failed) continue;
    for (const auto& m : g->mediators())
      if (m->waiting()) wanted.insert(m->module_keys.begin(), m->module_keys.end());
  }
  for (auto it = hooks_.begin(); it != hooks_.end();) {
    if (!wanted.count(it->first)) {
      it->second.remove();
      auto mod = modules_.find(it->first.module_path);
      if (mod != modules_.end())
        if (auto* point = dynamic_cast<HookPoint*>(mod->second); point && !point->has_hooks())
          point->clear_watch_query();
      hooks_.erase(it++);
    } else {
      ++it;
    }
  }
  std::set<Module*> newly_hooked;
  for (const ProviderKey& key : wanted) {
    if (hooks_.count(key)) continue;
    auto mod = modules_.find(key.module_path);
    if (mod == modules_.end()) continue;  // rejected at admission; nothing to hook
    Module* module = mod->second;
    newly_hooked.insert(module);
    // A point computed only on request asks which sequences a trace watches.
    if (auto* point = dynamic_cast<HookPoint*>(module)) {
      const std::string path = key.module_path;
      point->set_watch_query([this, path](int64_t token_start) { return watches(path, token_start); });
    }
    const batching::RowLevel level = runner_.structure().row_level(key);
    const at::Tensor* row_tokens = module->row_tokens();
    InstalledHook& hook = hooks_[key];
    switch (key.kind) {
      case KeyKind::ModuleSkip:
        // Before the module: the mediators set their values; after it: they replace its rows.
        hook.before = module->register_forward_pre_hook(
            [this, key, level, row_tokens, module](Module& m, const ModuleIO& in) -> std::optional<ModuleIO> {
              EventValue ev{in, std::vector<bool>(in.size(), false), level, nullptr, false, row_tokens, module};
              dispatch(key, ev);
              skip_whole_call(m, in);
              return std::nullopt;
            });
        hook.after = module->register_forward_hook(
            [this](Module& m, const ModuleIO&, const ModuleIO& out) { return apply_skips(m, out); });
        break;
      case KeyKind::ModuleOutput: {
        const TensorSharding* sharding = module->output_sharding();
        const HookPoint* point = dynamic_cast<const HookPoint*>(module);
        hook.after = module->register_forward_hook(
            [this, key, level, sharding, row_tokens, point](Module&, const ModuleIO&,
                                                            const ModuleIO& out) -> std::optional<ModuleIO> {
              EventValue ev{out, std::vector<bool>(out.size(), false), level, sharding, false, row_tokens};
              if (point) ev.sequence_start = point->sequence_start();
              dispatch(key, ev);
              return result_of(ev);
            });
        break;
      }
      case KeyKind::ModuleInput:
      case KeyKind::ModuleInputs: {
        const TensorSharding* sharding = module->input_sharding();
        const HookPoint* point = dynamic_cast<const HookPoint*>(module);
        hook.before = module->register_forward_pre_hook(
            [this, key, level, sharding, row_tokens, point](Module&, const ModuleIO& in) -> std::optional<ModuleIO> {
              EventValue ev{in, std::vector<bool>(in.size(), false), level, sharding, false, row_tokens};
              if (point) ev.sequence_start = point->sequence_start();
              dispatch(key, ev);
              return result_of(ev);
            });
        break;
      }
      default:
        TORCH_CHECK(false, "module key of kind ", static_cast<int>(key.kind), ": ", key.str());
    }
  }
  if (!attached_.empty()) sync_splices(wanted, newly_hooked);
}

void Interleaver::sync_splices(const std::set<ProviderKey>& wanted, const std::set<Module*>& newly_hooked) {
  for (AttachedModule* a : attached_) {
    const std::string& root = a->path();
    bool needed = false;
    for (const ProviderKey& key : wanted) {
      const std::string& p = key.module_path;
      if (p.size() >= root.size() && p.compare(0, root.size(), root) == 0 &&
          (p.size() == root.size() || p[root.size()] == '.')) {
        needed = true;
        break;
      }
    }
    auto it = splices_.find(a);
    if (!needed) {
      if (it != splices_.end()) {
        it->second.remove();
        splices_.erase(it);
      }
      continue;
    }
    if (it != splices_.end() && !newly_hooked.count(a->host())) continue;
    if (it != splices_.end()) it->second.remove();
    splices_[a] = a->splice();
  }
}

void Interleaver::gather(EventValue& ev) {
  if (!ev.sharding || ev.gathered || ev.io.empty() || !ev.io.at(0).defined()) return;
  ev.io.at(0) = ev.sharding->gather(ev.io.at(0));
  ev.gathered = true;
  ev.cloned[0] = true;  // the gathered tensor is ours: writes need no copy
}

std::optional<ModuleIO> Interleaver::result_of(EventValue& ev) {
  if (ev.gathered) {
    // In-place edits (setitem) leave no trace in `cloned`: always hand the
    // model its part of the whole as the mediators left it.
    ev.io.at(0) = ev.sharding->reshard(ev.io.at(0));
    return std::move(ev.io);
  }
  if (std::find(ev.cloned.begin(), ev.cloned.end(), true) == ev.cloned.end()) return std::nullopt;
  return std::move(ev.io);
}

void Interleaver::before_forward(const runner::StepContext& ctx) {
  step_ = ctx.groups;
  if (groups_.empty()) {
    if (!hooks_.empty() || !splices_.empty()) sync_hooks();
    return;
  }
  for (auto& [tid, g] : groups_)
    for (auto& m : g->mediators())
      if (!m->grad_keys.empty()) m->clear_grad_values();
  sync_hooks();
}

size_t Interleaver::deferrable_hooks(const runner::StepContext&) const {
  if (!splices_.empty() || !skips_.empty()) return 0;
  for (const auto& [tid, g] : groups_) {
    if (!g->started || g->failed) continue;
    for (const auto& m : g->mediators())
      if (!m->leaves_forward_alone()) return 0;
  }
  size_t n = 0;
  for (const auto& [key, hook] : hooks_) {
    if (key.kind != KeyKind::ModuleOutput && key.kind != KeyKind::ModuleInput && key.kind != KeyKind::ModuleInputs)
      return 0;
    const batching::RowLevel level = runner_.structure().row_level(key);
    if (level != batching::RowLevel::kToken && level != batching::RowLevel::kPrompt) return 0;
    n += static_cast<size_t>(hook.before.active()) + static_cast<size_t>(hook.after.active());
  }
  return n;
}

bool Interleaver::watches(const std::string& path, int64_t token_start) const {
  if (!step_) return false;
  const batching::BatchGroup* r = step_->owner_of_row(token_start, batching::RowLevel::kToken);
  if (!r) return false;
  TraceGroup* g = group_of(r->id);
  if (!g || !g->started || g->failed) return false;
  for (const auto& m : g->mediators()) {
    if (!m->waiting()) continue;
    const auto& rs = m->requests();
    if (std::find(rs.begin(), rs.end(), r->id) == rs.end()) continue;
    for (const ProviderKey& k : m->module_keys)
      if (k.module_path == path) return true;
  }
  return false;
}

const batching::BatchGroup* Interleaver::in_step(uint64_t request_id) const {
  return step_ ? step_->find(request_id) : nullptr;
}

bool Interleaver::rows_for(const Mediator& m, TraceGroup& g, const EventValue& ev, int64_t step,
                           batching::RowRanges& rows) const {
  rows.clear();
  bool routed_present = false;
  auto add = [&](uint64_t rid) {
    const batching::BatchGroup* r = in_step(rid);
    if (!r || r->num_generated != step) return;
    if (ev.level == batching::RowLevel::kSequence) {
      const batching::RowRange range = batching::sequence_rows(*r, ev.sequence_start, ev.io.at(0));
      if (!range.empty()) rows.push_back(range);
      return;
    }
    if (ev.level == batching::RowLevel::kRouted) {
      TORCH_CHECK(ev.row_tokens != nullptr && ev.row_tokens->defined(), "routed module without row tokens");
      batching::routed_rows(*r, *ev.row_tokens, rows);
      routed_present = true;
      return;
    }
    const batching::RowRange range = r->rows(ev.level);
    if (!range.empty()) rows.push_back(range);
  };
  for (uint64_t rid : m.requests()) add(rid);
  return !rows.empty() || routed_present;
}

bool Interleaver::whole_tuple(const ProviderKey& key, const EventValue& ev) {
  return key.kind == KeyKind::ModuleInputs || (key.kind == KeyKind::ModuleOutput && ev.io.is_tuple());
}

dsl::Value Interleaver::read(EventValue& ev, const ProviderKey& key, const batching::RowRanges& rows) const {
  auto slice = [&](const at::Tensor& t) -> at::Tensor { return t.defined() ? batching::gather_rows(t, rows) : t; };
  if (whole_tuple(key, ev)) {
    std::vector<at::Tensor> items;
    for (const auto& t : ev.io.items()) items.push_back(slice(t));
    return dsl::Value::tuple(std::move(items));
  }
  return dsl::Value(slice(ev.io.at(0)));
}

void Interleaver::write(EventValue& ev, const ProviderKey& key, const batching::RowRanges& rows,
                        const dsl::Value& value) {
  const int64_t total = batching::count_rows(rows);
  auto write_elem = [&](size_t i, const dsl::Value& v) {
    at::Tensor& target = ev.io.at(i);
    if (!target.defined())
      throw Error("cannot set element " + std::to_string(i) + " of `" + key.str() + "`: it is None");
    at::Tensor src;
    if (v.is_tensor())
      src = v.as_tensor();
    else if (v.kind() == dsl::ValueKind::Int)
      src = at::scalar_tensor(v.as_int());
    else if (v.is_number())
      src = at::scalar_tensor(v.as_double());
    else
      throw Error("cannot set `" + key.str() + "` to " + v.describe() + " (a tensor or a number is needed)");
    if (key.kind == KeyKind::Samples) check_token_ids(src);
    std::vector<int64_t> shape = target.sizes().vec();
    shape[0] = total;
    if (!at::is_expandable_to(src.sizes(), shape)) {
      throw Error("shape mismatch: cannot set `" + key.str() + "` of this invoke (shape " + shape_string(shape) +
                  ") to a value of shape " + shape_string(src.sizes()));
    }
    if (!ev.cloned[i]) {
      target = target.clone();
      ev.cloned[i] = true;
    }
    batching::write_rows(target, rows, src);
  };
  if (!whole_tuple(key, ev)) {
    write_elem(0, value);
    return;
  }
  const std::vector<dsl::Value> items = tuple_write_items(key, value, ev.io.size());
  for (size_t i = 0; i < items.size(); ++i)
    if (!items[i].is_none() && ev.io.at(i).defined()) write_elem(i, items[i]);
}

void Interleaver::check_token_ids(const at::Tensor& ids) const {
  if (at::isFloatingType(ids.scalar_type()) || at::isComplexType(ids.scalar_type()) || ids.scalar_type() == at::kBool)
    throw Error("cannot set `samples` to a tensor of " + std::string(c10::toString(ids.scalar_type())) +
                ": token ids are integers");
  if (ids.numel() == 0) return;
  const at::Tensor v = ids.to(at::kCPU, at::kLong);
  const int64_t lo = v.min().item<int64_t>(), hi = v.max().item<int64_t>();
  if (lo < 0 || hi >= vocab_size_) {
    throw Error("cannot set `samples` to token id " + std::to_string(lo < 0 ? lo : hi) +
                ": outside the model's vocabulary [0, " + std::to_string(vocab_size_) + ")");
  }
}

void Interleaver::dispatch(const ProviderKey& key, EventValue& ev) {
  batching::RowRanges rows;
  for (auto& [tid, gp] : groups_) {
    TraceGroup& g = *gp;
    if (!g.started || g.failed) continue;
    for (size_t i = 0; i < g.mediators().size() && !g.failed; ++i) {
      Mediator& m = *g.mediators()[i];
      while (!g.failed && m.waiting() && m.wait_key() == key && rows_for(m, g, ev, m.wait_step(), rows)) {
        gather(ev);  // outside the mediator's error handling: a failed collective ends the worker
        // A sequence's value is all of it: its first dimension (heads) may have just been gathered whole.
        if (ev.level == batching::RowLevel::kSequence) rows.assign(1, batching::RowRange{0, ev.io.at(0).size(0)});
        if (m.wait_kind() == Mediator::WaitKind::kGet) {
          dsl::Value v;
          try {
            v = read(ev, key, rows);
          } catch (const std::exception& e) {
            m.resume_with_error(e.what());
            after_resume(m, g);
            continue;
          }
          // A gather over several requests (an invoke without a prompt) is a
          // copy: write it back afterwards so in-place edits reach the model.
          dsl::Value gathered = rows.size() > 1 ? v : dsl::Value();
          // In a gradient step a value some grad() names is written back as
          // well: the forward then goes on with the very tensor the graph
          // holds, so autograd reaches it (a view of the model's tensor would
          // sit beside the graph, not in it).
          if (GradientForward::active() && m.grad_keys.count(key)) {
            m.note_grad_value(v);
            gathered = v;
          }
          batching::RowRanges gathered_rows = rows;
          m.resume_with(std::move(v));
          after_resume(m, g);
          if (!gathered.is_none() && !g.failed) write(ev, key, gathered_rows, gathered);
        } else if (ev.module != nullptr) {  // a skip: applied around the module's body
          const dsl::Value& v = m.set_value();
          if (!v.is_tensor()) {
            m.resume_with_error("cannot skip `" + key.module_path + "` with " + v.describe() + " (a tensor is needed)");
            after_resume(m, g);
            continue;
          }
          skips_[ev.module].push_back(PendingSkip{&g, m.invoke(), rows, v.as_tensor()});
          m.resume_after_set();
          after_resume(m, g);
        } else {
          try {
            write(ev, key, rows, m.set_value());
          } catch (const std::exception& e) {
            m.resume_with_error(e.what());
            after_resume(m, g);
            continue;
          }
          m.resume_after_set();
          after_resume(m, g);
        }
      }
    }
  }
}

void Interleaver::skip_whole_call(Module& m, const ModuleIO& in) {
  auto it = skips_.find(&m);
  if (it == skips_.end() || in.empty() || !in.at(0).defined() || in.at(0).dim() == 0) return;
  if (m.input_sharding() != nullptr || m.output_sharding() != nullptr) return;  // refused in apply_skips
  const at::Tensor& x = in.at(0);                                               // [rows, ...]
  int64_t covered = 0;
  for (const PendingSkip& s : it->second) covered += batching::count_rows(s.rows);
  if (covered != x.size(0)) return;  // other requests need the body
  // Every row is skipped: the output is built from the values, shaped like
  // the first one's rows (checked against each other in apply_skips' way).
  const at::Tensor& v0 = it->second.front().value;
  std::vector<int64_t> shape = v0.dim() >= 2 ? v0.sizes().vec() : x.sizes().vec();
  shape[0] = x.size(0);
  at::Tensor y = at::empty(shape, x.options());
  for (const PendingSkip& s : it->second) {
    std::vector<int64_t> want = shape;
    want[0] = batching::count_rows(s.rows);
    if (!at::is_expandable_to(s.value.sizes(), want)) return;  // apply_skips reports it after the body
  }
  for (const PendingSkip& s : it->second) batching::write_rows(y, s.rows, s.value);
  m.skip_body_with(y);
  skips_.erase(it);
}

std::optional<ModuleIO> Interleaver::apply_skips(Module& m, const ModuleIO& out) {
  auto it = skips_.find(&m);
  if (it == skips_.end()) return std::nullopt;
  std::vector<PendingSkip> skips = std::move(it->second);
  skips_.erase(it);
  ModuleIO io = out;
  at::Tensor& y = io.at(0);  // [rows, ...]
  bool cloned = false;
  for (const PendingSkip& s : skips) {
    if (s.group->failed) continue;
    if (m.output_sharding() != nullptr || m.input_sharding() != nullptr) {
      fail_group(*s.group, "invoke " + std::to_string(s.invoke) + ": cannot skip `" + m.path() +
                               "`: its values are split across tensor-parallel ranks (skip the block around it)");
      continue;
    }
    std::vector<int64_t> shape = y.sizes().vec();
    shape[0] = batching::count_rows(s.rows);
    if (!at::is_expandable_to(s.value.sizes(), shape)) {
      fail_group(*s.group, "invoke " + std::to_string(s.invoke) + ": shape mismatch: cannot skip `" + m.path() +
                               "` of this invoke (output shape " + shape_string(shape) + ") with a value of shape " +
                               shape_string(s.value.sizes()));
      continue;
    }
    if (!cloned) {
      y = y.clone();
      cloned = true;
    }
    batching::write_rows(y, s.rows, s.value);
  }
  if (!cloned) return std::nullopt;
  return io;
}

void Interleaver::on_logits(const runner::StepContext& ctx, at::Tensor& logits) {
  if (groups_.empty()) return;
  EventValue ev{ModuleIO(logits), {false}, batching::RowLevel::kPrompt};
  static const ProviderKey kLogits{KeyKind::Logits, {}};
  dispatch(kLogits, ev);
  if (ev.cloned[0]) logits = ev.io.at(0);
}

void Interleaver::on_samples(const runner::StepContext& ctx, at::Tensor& tokens) {
  if (groups_.empty()) return;
  EventValue ev{ModuleIO(tokens), {false}, batching::RowLevel::kPrompt};
  static const ProviderKey kSamples{KeyKind::Samples, {}};
  dispatch(kSamples, ev);
  if (ev.cloned[0]) tokens = ev.io.at(0);
  // The tokens each traced request continues with: its "result" at the end.
  at::Tensor cpu = tokens.to(at::kCPU, at::kLong);
  const auto* tok = cpu.data_ptr<int64_t>();
  for (const auto& r : *ctx.groups) {
    if (!r.samples()) continue;
    if (TraceGroup* g = group_of(r.id)) g->results()[r.id].push_back(tok[r.sample_row]);
  }
  check_missed(ctx);
}

void Interleaver::check_missed(const runner::StepContext& ctx) {
  for (auto& [tid, gp] : groups_) {
    TraceGroup& g = *gp;
    if (!g.started || g.failed) continue;
    for (size_t i = 0; i < g.mediators().size() && !g.failed; ++i) {
      Mediator& m = *g.mediators()[i];
      if (!m.waiting() || m.wait_key().kind == KeyKind::Result) continue;
      // Its step has come in this step's batch and gone without the value.
      bool passed = false;
      auto check = [&](uint64_t rid) {
        const batching::BatchGroup* r = in_step(rid);
        if (r && r->num_generated >= m.wait_step()) passed = true;
      };
      for (uint64_t rid : m.requests()) check(rid);
      if (!passed) continue;
      m.resume_with_error(missed_message(m.wait_key(), m.wait_step()));
      after_resume(m, g);
    }
  }
}

void Interleaver::finish_request(TraceGroup& g, uint64_t id, runner::FinishedRequest& out) {
  auto drain = [&](Mediator& m, const dsl::Value& result_value) {
    while (m.waiting()) {
      const bool result = m.wait_key().kind == KeyKind::Result;
      if (result && m.wait_kind() == Mediator::WaitKind::kGet)
        m.resume_with(result_value);
      else if (result)
        m.resume_with_error("`result` cannot be set");
      else
        m.resume_finished();
      after_resume(m, g);
    }
    if (m.state() == Mediator::State::kFailed && out.error.empty()) {
      out.reason = FinishReason::kError;
      out.error = "invoke " + std::to_string(m.invoke()) + ": " + m.error();
    }
    for (auto& [name, v] : m.saves()) out.saves[name] = std::move(v);
  };
  const auto& res = g.results()[id];
  dsl::Value result(at::tensor(res, at::kLong));
  for (auto& m : g.mediators())
    if (m->request_id() == id) drain(*m, result);
  g.finished().push_back(id);
  g.remove_mediators_of(id);
  // The last request of an invoke with several prompts ends it, and the last
  // of the trace its invokes without a prompt; their result is a tuple, one
  // per request.
  for (auto& m : g.mediators()) {
    if (m->request_id() != 0) continue;
    const auto& rs = m->requests();
    const bool last =
        std::find(rs.begin(), rs.end(), id) != rs.end() && std::all_of(rs.begin(), rs.end(), [&](uint64_t rid) {
          return std::find(g.finished().begin(), g.finished().end(), rid) != g.finished().end();
        });
    if (!last) continue;
    std::vector<at::Tensor> all;
    for (uint64_t rid : rs) all.push_back(at::tensor(g.results()[rid], at::kLong));
    drain(*m, dsl::Value::tuple(std::move(all)));
  }
}

void Interleaver::on_finished(uint64_t id, runner::FinishedRequest& out) {
  TraceGroup* g = group_of(id);
  if (!g) return;
  const uint64_t tid = g->trace_id();
  if (!g->failed && g->started && out.reason != FinishReason::kError) {
    finish_request(*g, id, out);
  } else {
    g->finished().push_back(id);
    g->remove_mediators_of(id);
    out.saves.clear();
  }
  trace_of_.erase(id);
  if (g->finished().size() >= g->requests().size() && (g->complete() || g->failed)) groups_.erase(tid);
}

std::vector<std::pair<uint64_t, std::string>> Interleaver::take_errors() {
  std::vector<std::pair<uint64_t, std::string>> out;
  out.swap(errors_);
  return out;
}

std::vector<uint64_t> Interleaver::take_stopped() {
  std::vector<uint64_t> out(stopped_.begin(), stopped_.end());
  stopped_.clear();
  return out;
}

}  // namespace nnsight::tracing
