#include "front/tracing/interleaver.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>

#include <nnsight/error.hpp>

#include "dsl/errors.h"
#include "dsl/provider_key.h"
#include "front/tracing/schedule_check.h"
#include "front/tracing/trace_payload.h"

namespace nnsight::tracing {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string shape_str(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Module keys ("<path>.output" / ".input" / ".inputs") a graph reads or writes.
std::set<std::string> module_keys(const dsl::Graph& g) {
  std::set<std::string> keys;
  for (const auto& n : g.nodes) {
    if (n.kind != dsl::NodeKind::Get && n.kind != dsl::NodeKind::Set) continue;
    auto k = dsl::parse_provider_key(n.name);
    if (k && !k->module_path.empty()) keys.insert(n.name);
  }
  return keys;
}

const char* kMissed =
    "Execution complete but `%s` was not provided at step %lld. Did you call an Envoy out of order? "
    "Investigate why this module was not called.";

std::string missed_message(const std::string& key, int64_t step) {
  char buf[512];
  std::snprintf(buf, sizeof buf, kMissed, key.c_str(), static_cast<long long>(step));
  return buf;
}

}  // namespace

Interleaver::Interleaver(runner::ModelRunner& runner, dsl::Limits limits, const dsl::FunctionRegistry* functions)
    : runner_(runner), limits_(limits), functions_(functions), logits_module_("lm_head") {
  for (auto& [path, m] : runner_.model().named_hookable_modules()) modules_[path] = m;
}

Interleaver::~Interleaver() {
  for (auto& [key, h] : hooks_) h.remove();
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
    TracePayload p = decode_payload(nr.params.payload(), limits_);
    auto& slot = groups_[trace_id];
    if (!slot) slot = std::make_unique<TraceGroup>(trace_id, p.num_requests, p.num_invokes);
    g = slot.get();
    trace_of_[nr.id] = trace_id;
    g->requests().push_back(nr.id);
    if (g->failed) throw TraceError("another invoke of this trace failed before it started");
    if (g->started) throw TraceError("trace " + std::to_string(trace_id) + " is already running");
    for (auto& pg : p.graphs) {
      check_graph(pg.graph, runner_.structure());
      std::set<std::string> keys = module_keys(pg.graph);
      const uint32_t invoke = pg.graph.invoke;
      dsl::ValidatedGraph vg = dsl::validate(std::move(pg.graph), dsl::ValidateOptions().with_limits(limits_).with_functions(functions_));
      auto m = std::make_unique<Mediator>(*g, pg.role == GraphRole::kPromptless ? 0 : nr.id, invoke, pg.role,
                                          std::move(vg), functions_);
      m->module_keys = std::move(keys);
      g->add(std::move(m));
    }
    if (g->complete()) {
      std::vector<const dsl::Graph*> graphs(g->num_invokes(), nullptr);
      for (const auto& m : g->mediators())
        if (m->role() != GraphRole::kAuxiliary && m->invoke() < graphs.size()) graphs[m->invoke()] = &m->graph();
      for (size_t i = 0; i < graphs.size(); ++i)
        if (!graphs[i]) throw TraceError("trace " + std::to_string(trace_id) + " has no graph for invoke " + std::to_string(i));
      dsl::validate_trace(graphs);
      check_trace(graphs, runner_.structure());
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
    if (std::find(g.finished().begin(), g.finished().end(), rid) == g.finished().end()) errors_.emplace_back(rid, message);
}

void Interleaver::after_resume(Mediator& m, TraceGroup& g) {
  if (m.stop_requested()) {
    if (m.request_id() != 0) stopped_.insert(m.request_id());
    else
      for (uint64_t rid : g.requests()) stopped_.insert(rid);
  }
  if (m.state() == Mediator::State::kFailed) fail_group(g, "invoke " + std::to_string(m.invoke()) + ": " + m.error());
}

void Interleaver::sync_hooks() {
  std::set<std::string> wanted;
  for (const auto& [tid, g] : groups_) {
    if (!g->started || g->failed) continue;
    for (const auto& m : g->mediators())
      if (m->waiting()) wanted.insert(m->module_keys.begin(), m->module_keys.end());
  }
  for (auto it = hooks_.begin(); it != hooks_.end();) {
    if (!wanted.count(it->first)) {
      it->second.remove();
      it = hooks_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& key : wanted) {
    if (hooks_.count(key)) continue;
    auto pk = dsl::parse_provider_key(key);
    auto mod = modules_.find(std::string(pk->module_path));
    if (mod == modules_.end()) continue;  // rejected at admission; nothing to hook
    const bool sample_rows = std::string(pk->module_path) == logits_module_;
    if (pk->kind == dsl::KeyKind::ModuleOutput) {
      const TensorSharding* sharding = mod->second->output_sharding();
      hooks_[key] = mod->second->register_forward_hook(
          [this, key, sample_rows, sharding](Module&, const ModuleIO&, const ModuleIO& out) -> std::optional<ModuleIO> {
            EventValue ev{out, std::vector<bool>(out.size(), false), sample_rows, sharding};
            dispatch(key, ev);
            return result_of(ev);
          });
    } else {
      const TensorSharding* sharding = mod->second->input_sharding();
      hooks_[key] = mod->second->register_forward_pre_hook(
          [this, key, sample_rows, sharding](Module&, const ModuleIO& in) -> std::optional<ModuleIO> {
            EventValue ev{in, std::vector<bool>(in.size(), false), sample_rows, sharding};
            dispatch(key, ev);
            return result_of(ev);
          });
    }
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
  step_.clear();
  if (groups_.empty()) {
    if (!hooks_.empty()) sync_hooks();
    return;
  }
  for (const auto& r : *ctx.requests)
    if (trace_of_.count(r.id)) step_[r.id] = &r;
  sync_hooks();
}

bool Interleaver::rows_for(const Mediator& m, TraceGroup& g, bool sample_rows, int64_t step, Rows& rows) const {
  rows.clear();
  auto add = [&](uint64_t rid) {
    auto it = step_.find(rid);
    if (it == step_.end() || it->second->num_generated != step) return;
    const runner::StepRequest& r = *it->second;
    if (sample_rows) {
      if (r.sample_row >= 0) rows.emplace_back(r.sample_row, 1);
    } else {
      rows.emplace_back(r.token_start, r.num_tokens);
    }
  };
  if (m.request_id() != 0) {
    add(m.request_id());
  } else {
    for (uint64_t rid : g.requests()) add(rid);
  }
  return !rows.empty();
}

dsl::Value Interleaver::read(EventValue& ev, const std::string& key, const Rows& rows) const {
  auto slice = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    if (rows.size() == 1) return t.narrow(0, rows[0].first, rows[0].second);
    std::vector<at::Tensor> parts;
    for (const auto& r : rows) parts.push_back(t.narrow(0, r.first, r.second));
    return at::cat(parts, 0);
  };
  const bool whole = ends_with(key, ".inputs") || (ends_with(key, ".output") && ev.io.is_tuple());
  if (whole) {
    std::vector<at::Tensor> items;
    for (const auto& t : ev.io.items()) items.push_back(slice(t));
    return dsl::Value::tuple(std::move(items));
  }
  return dsl::Value(slice(ev.io.at(0)));
}

void Interleaver::write(EventValue& ev, const std::string& key, const Rows& rows, const dsl::Value& value) {
  int64_t total = 0;
  for (const auto& r : rows) total += r.second;
  auto write_elem = [&](size_t i, const dsl::Value& v) {
    at::Tensor& target = ev.io.at(i);
    if (!target.defined()) throw Error("cannot set element " + std::to_string(i) + " of `" + key + "`: it is None");
    at::Tensor src;
    if (v.is_tensor()) src = v.as_tensor();
    else if (v.kind() == dsl::ValueKind::Int) src = at::scalar_tensor(v.as_int());
    else if (v.is_number()) src = at::scalar_tensor(v.as_double());
    else throw Error("cannot set `" + key + "` to " + v.describe() + " (a tensor or a number is needed)");
    std::vector<int64_t> shape = target.sizes().vec();
    shape[0] = total;
    if (!at::is_expandable_to(src.sizes(), shape)) {
      throw Error("shape mismatch: cannot set `" + key + "` of this invoke (shape " + shape_str(shape) +
                  ") to a value of shape " + shape_str(src.sizes()));
    }
    if (!ev.cloned[i]) {
      target = target.clone();
      ev.cloned[i] = true;
    }
    at::Tensor expanded = src.to(target.device(), target.scalar_type()).expand(shape);
    int64_t off = 0;
    for (const auto& r : rows) {
      target.narrow(0, r.first, r.second).copy_(expanded.narrow(0, off, r.second));
      off += r.second;
    }
  };
  const bool whole = ends_with(key, ".inputs") || (ends_with(key, ".output") && ev.io.is_tuple());
  if (!whole) {
    write_elem(0, value);
    return;
  }
  std::vector<dsl::Value> items;
  if (value.kind() == dsl::ValueKind::Tuple) {
    for (const auto& t : value.as_tuple()) items.emplace_back(t);
  } else if (value.kind() == dsl::ValueKind::List) {
    items = value.as_list();
  } else {
    throw Error("cannot set `" + key + "`, a tuple of " + std::to_string(ev.io.size()) + ", to " + value.describe() +
                " (build the tuple with make_tuple, or write into its elements)");
  }
  if (items.size() != ev.io.size())
    throw Error("cannot set `" + key + "`: the model's tuple has " + std::to_string(ev.io.size()) +
                " elements, the value has " + std::to_string(items.size()));
  for (size_t i = 0; i < items.size(); ++i)
    if (!items[i].is_none() && ev.io.at(i).defined()) write_elem(i, items[i]);
}

void Interleaver::dispatch(const std::string& key, EventValue& ev) {
  Rows rows;
  for (auto& [tid, gp] : groups_) {
    TraceGroup& g = *gp;
    if (!g.started || g.failed) continue;
    for (size_t i = 0; i < g.mediators().size() && !g.failed; ++i) {
      Mediator& m = *g.mediators()[i];
      while (!g.failed && m.waiting() && m.wait_key() == key &&
             rows_for(m, g, ev.sample_rows, m.wait_step(), rows)) {
        gather(ev);  // outside the mediator's error handling: a failed collective ends the worker
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
          Rows gathered_rows = rows;
          m.resume_with(std::move(v));
          after_resume(m, g);
          if (!gathered.is_none() && !g.failed) write(ev, key, gathered_rows, gathered);
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

void Interleaver::on_logits(const runner::StepContext& ctx, at::Tensor& logits) {
  if (groups_.empty()) return;
  EventValue ev{ModuleIO(logits), {false}, true};
  dispatch("logits", ev);
  if (ev.cloned[0]) logits = ev.io.at(0);
}

void Interleaver::on_samples(const runner::StepContext& ctx, at::Tensor& tokens) {
  if (groups_.empty()) return;
  EventValue ev{ModuleIO(tokens), {false}, true};
  dispatch("samples", ev);
  if (ev.cloned[0]) tokens = ev.io.at(0);
  // The tokens each traced request continues with: its "result" at the end.
  at::Tensor cpu = tokens.to(at::kCPU, at::kLong);
  const auto* tok = cpu.data_ptr<int64_t>();
  for (const auto& [rid, r] : step_) {
    if (r->sample_row < 0) continue;
    if (TraceGroup* g = group_of(rid)) g->results()[rid].push_back(tok[r->sample_row]);
  }
  check_missed(ctx);
}

void Interleaver::check_missed(const runner::StepContext& ctx) {
  for (auto& [tid, gp] : groups_) {
    TraceGroup& g = *gp;
    if (!g.started || g.failed) continue;
    for (size_t i = 0; i < g.mediators().size() && !g.failed; ++i) {
      Mediator& m = *g.mediators()[i];
      if (!m.waiting() || m.wait_key() == "result") continue;
      // Its step has come in this step's batch and gone without the value.
      bool passed = false;
      auto check = [&](uint64_t rid) {
        auto it = step_.find(rid);
        if (it != step_.end() && it->second->num_generated >= m.wait_step()) passed = true;
      };
      if (m.request_id() != 0) check(m.request_id());
      else
        for (uint64_t rid : g.requests()) check(rid);
      if (!passed) continue;
      m.resume_with_error(missed_message(m.wait_key(), m.wait_step()));
      after_resume(m, g);
    }
  }
}

void Interleaver::finish_request(TraceGroup& g, uint64_t id, runner::FinishedRequest& out) {
  auto drain = [&](Mediator& m, const dsl::Value& result) {
    while (m.waiting()) {
      if (m.wait_key() == "result" && m.wait_kind() == Mediator::WaitKind::kGet) m.resume_with(result);
      else if (m.wait_key() == "result") m.resume_with_error("`result` cannot be set");
      else m.resume_finished();
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
  // The last request of the trace also ends its invokes without a prompt.
  if (g.finished().size() == g.requests().size() && g.complete()) {
    std::vector<at::Tensor> all;
    for (uint64_t rid : g.requests()) all.push_back(at::tensor(g.results()[rid], at::kLong));
    dsl::Value results = dsl::Value::tuple(std::move(all));
    for (auto& m : g.mediators())
      if (m->request_id() == 0) drain(*m, results);
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
  step_.erase(id);
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
