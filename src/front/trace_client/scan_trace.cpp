#include "front/trace_client/scan_trace.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>

#include <nnsight/error.hpp>

#include "core/shape_string.h"
#include "dsl/errors.h"
#include "dsl/evaluate.h"
#include "dsl/validate.h"
#include "front/trace_worker/trace_payload.h"
#include "front/trace_worker/tuple_write.h"

namespace nnsight::tracing {
namespace {

using batching::RowLevel;

// The rows a graph's values have: its prompts' token counts, and the steps
// its requests run.
struct Rows {
  std::vector<int64_t> prompt_tokens;
  int64_t max_tokens = 1;

  int64_t requests() const { return static_cast<int64_t>(prompt_tokens.size()); }
  int64_t tokens() const { return std::accumulate(prompt_tokens.begin(), prompt_tokens.end(), int64_t{0}); }
};

at::Tensor meta(std::vector<int64_t> sizes, at::ScalarType dtype) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(at::kMeta));
}

class ScanProvider final : public dsl::Provider {
 public:
  ScanProvider(const runner::ModelStructure& structure, Rows rows,
               const std::map<uint32_t, std::unique_ptr<dsl::Evaluator>>& earlier,
               std::map<std::string, dsl::Value>& saves)
      : structure_(structure), rows_(std::move(rows)), earlier_(earlier), saves_(saves) {}

  dsl::Value get(const ProviderKey& key, int64_t step) override {
    if (step >= rows_.max_tokens) throw dsl::RequestFinished();
    return value_of(key, step);
  }

  void set(const ProviderKey& key, int64_t step, dsl::Value value) override {
    if (step >= rows_.max_tokens) throw dsl::RequestFinished();
    if (key.kind == KeyKind::Result) throw Error("`result` cannot be set");
    check_write(key, value_of(key, step), value);
  }

  void save(const std::string& name, const dsl::Value& value, dsl::SaveMode) override { saves_[name] = value; }

  dsl::Value external(uint32_t invoke, dsl::NodeId node) override {
    auto it = earlier_.find(invoke);
    if (it == earlier_.end() || !it->second->has_value(node))
      throw dsl::ValueNeverProvided("invoke " + std::to_string(invoke) + " has not computed node " +
                                    std::to_string(node) + " (yet) at this point of the model");
    return it->second->value(node);
  }

  // The module's output for rows of x: x's leading dimensions, the output's feature dimensions.
  dsl::Value call(const std::string& module, const dsl::Value& arg) override {
    const runner::ModuleInfo* m = structure_.find_module(module);
    if (!m || m->outputs.empty() || !m->outputs[0].defined() || m->inputs.empty() || !m->inputs[0].defined())
      throw Error("scan: the start-up probe saw no value of module '" + module + "'");
    const at::Tensor& x = arg.as_tensor();
    const auto& in = m->inputs[0].sizes;
    const auto& out = m->outputs[0].sizes;
    const int64_t lead = x.dim() - (static_cast<int64_t>(in.size()) - 1);
    if (lead < 0) throw Error("cannot call '" + module + "' on a value of shape " + shape_string(x.sizes()));
    std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().begin() + lead);
    sizes.insert(sizes.end(), out.begin() + (out.empty() ? 0 : 1), out.end());
    return meta(sizes, static_cast<at::ScalarType>(m->outputs[0].dtype));
  }

  std::vector<at::Tensor> backward(const at::Tensor&, const std::vector<at::Tensor>& inputs) override {
    std::vector<at::Tensor> grads;
    for (const auto& t : inputs) grads.push_back(at::zeros_like(t));
    return grads;
  }

 private:
  int64_t rows(RowLevel level, int64_t step) const {
    if (level == RowLevel::kPrompt) return rows_.requests();
    return step == 0 ? rows_.tokens() : rows_.requests();
  }

  at::Tensor tensor_of(const runner::ProbedTensor& p, RowLevel level, int64_t step) const {
    if (!p.defined()) return at::Tensor();
    std::vector<int64_t> sizes = p.sizes;
    if (level == RowLevel::kSequence && sizes.size() >= 3) {
      // [heads, query, key] of the invoke's first prompt (the probe ran one of two tokens).
      const int64_t prompt = rows_.prompt_tokens.empty() ? 1 : rows_.prompt_tokens.front();
      sizes[1] = step == 0 ? prompt : 1;
      sizes[2] = prompt + step;
    } else if (!sizes.empty() && sizes[0] == (level == RowLevel::kPrompt ? 1 : runner::ModelStructure::kProbeTokens)) {
      sizes[0] = rows(level, step);
    }
    return meta(sizes, static_cast<at::ScalarType>(p.dtype));
  }

  dsl::Value value_of(const ProviderKey& key, int64_t step) const {
    switch (key.kind) {
      case KeyKind::Logits: {
        const runner::ProbedTensor& l = structure_.logits();
        if (!l.defined()) throw Error("scan: the start-up probe recorded no logits");
        return meta({rows_.requests(), l.sizes.back()}, static_cast<at::ScalarType>(l.dtype));
      }
      case KeyKind::Samples:
        return meta({rows_.requests()}, at::kLong);
      case KeyKind::Result: {
        if (rows_.requests() == 1) return meta({rows_.max_tokens}, at::kLong);
        std::vector<at::Tensor> all(static_cast<size_t>(rows_.requests()), meta({rows_.max_tokens}, at::kLong));
        return dsl::Value::tuple(std::move(all));
      }
      default:
        break;
    }
    const runner::ModuleInfo* m = structure_.find_module(key.module_path);
    const bool input = key.kind == KeyKind::ModuleInput || key.kind == KeyKind::ModuleInputs;
    const std::vector<runner::ProbedTensor>* probed = m ? (input ? &m->inputs : &m->outputs) : nullptr;
    if (!probed || probed->empty())
      throw dsl::ValueNeverProvided("`" + key.str() +
                                    "` was not produced in the start-up probe's forward: scan cannot know its shape");
    std::vector<at::Tensor> items;
    for (const auto& p : *probed) items.push_back(tensor_of(p, m->row_level, step));
    if (key.kind == KeyKind::ModuleInputs || (!input && m->output_tuple_size > 0))
      return dsl::Value::tuple(std::move(items));
    return dsl::Value(items.at(0));
  }

  // What Interleaver::write checks, with its messages.
  static void check_write(const ProviderKey& key, const dsl::Value& target, const dsl::Value& value) {
    auto elem = [&](size_t i, const at::Tensor& t, const dsl::Value& v) {
      if (!t.defined()) throw Error("cannot set element " + std::to_string(i) + " of `" + key.str() + "`: it is None");
      std::vector<int64_t> src;
      if (v.is_tensor())
        src = v.as_tensor().sizes().vec();
      else if (!v.is_number())
        throw Error("cannot set `" + key.str() + "` to " + v.describe() + " (a tensor or a number is needed)");
      if (!at::is_expandable_to(src, t.sizes()))
        throw Error("shape mismatch: cannot set `" + key.str() + "` of this invoke (shape " + shape_string(t.sizes()) +
                    ") to a value of shape " + shape_string(src));
    };
    if (!target.is(dsl::ValueKind::Tuple)) return elem(0, target.as_tensor(), value);
    const auto& model = target.as_tuple();
    const std::vector<dsl::Value> items = tuple_write_items(key, value, model.size());
    for (size_t i = 0; i < items.size(); ++i)
      if (!items[i].is_none() && model[i].defined()) elem(i, model[i], items[i]);
  }

  const runner::ModelStructure& structure_;
  Rows rows_;
  const std::map<uint32_t, std::unique_ptr<dsl::Evaluator>>& earlier_;
  std::map<std::string, dsl::Value>& saves_;
};

ScannedValue scanned(const dsl::Value& v) {
  ScannedValue s;
  if (v.is_tensor()) {
    s.is_tensor = true;
    s.shape = v.as_tensor().sizes().vec();
    s.dtype = v.as_tensor().scalar_type();
  } else if (v.kind() == dsl::ValueKind::Tuple) {
    s.kind = "tuple";
    for (const auto& t : v.as_tuple()) {
      ScannedValue item = t.defined() ? scanned(dsl::Value(t)) : ScannedValue();
      item.is_none = !t.defined();
      s.items.push_back(std::move(item));
    }
  } else if (v.kind() == dsl::ValueKind::List) {
    s.kind = "list";
    for (const auto& x : v.as_list()) s.items.push_back(scanned(x));
  } else {
    s.kind = v.describe();
  }
  return s;
}

std::string label(const dsl::Node& n) {
  switch (n.kind) {
    case dsl::NodeKind::Get:
      return "get " + n.name + " (step " + n.step.str() + ")";
    case dsl::NodeKind::Op:
      return "op " + n.name;
    case dsl::NodeKind::Call:
      return "call " + n.name;
    case dsl::NodeKind::Save:
      return "save " + n.name;
    default:
      return dsl::node_kind_name(n.kind);
  }
}

// A graph of the trace, with the rows its values have.
struct ScanGraph {
  PayloadGraph graph;
  Rows rows;
};

}  // namespace

ScanResult scan_trace(const runner::ModelStructure& structure, const std::vector<runner::RequestInput>& requests,
                      const std::vector<int64_t>& prompt_tokens, uint32_t num_edits, const dsl::Limits& limits) {
  TORCH_CHECK(requests.size() == prompt_tokens.size() && !requests.empty(), "scan_trace: one token count per request");
  // Each invoke's prompts (its requests are contiguous), and every prompt (what invokes without one see).
  std::map<int32_t, Rows> invokes;
  Rows all;
  std::vector<ScanGraph> graphs;
  std::vector<int32_t> graph_invoke;
  for (size_t r = 0; r < requests.size(); ++r) {
    const auto& params = requests[r].params;
    Rows& rows = invokes[params.invoke_index()];
    rows.prompt_tokens.push_back(prompt_tokens[r]);
    rows.max_tokens = std::max(rows.max_tokens, params.max_tokens());
    all.prompt_tokens.push_back(prompt_tokens[r]);
    all.max_tokens = std::max(all.max_tokens, params.max_tokens());
    TracePayload payload = decode_payload(params.payload(), limits);
    for (auto& g : payload.graphs) {
      graphs.push_back(ScanGraph{std::move(g), Rows()});
      graph_invoke.push_back(params.invoke_index());
    }
  }
  for (size_t i = 0; i < graphs.size(); ++i)
    graphs[i].rows = graphs[i].graph.role == GraphRole::kPromptless ? all : invokes[graph_invoke[i]];
  // In the order a step's mediators run: by invoke, the invoke's own graph before its auxiliary ones.
  std::stable_sort(graphs.begin(), graphs.end(), [](const ScanGraph& a, const ScanGraph& b) {
    return std::make_pair(a.graph.graph.invoke, static_cast<int>(a.graph.role)) <
           std::make_pair(b.graph.graph.invoke, static_cast<int>(b.graph.role));
  });

  uint64_t trace_id = requests.front().params.trace_id();
  std::map<uint32_t, std::unique_ptr<dsl::Evaluator>> mains;
  std::vector<std::unique_ptr<dsl::ValidatedGraph>> keep;
  std::vector<std::unique_ptr<ScanProvider>> providers;
  std::vector<ScannedValue> values;
  std::map<std::string, dsl::Value> saves;
  for (auto& sg : graphs) {
    dsl::Graph g = std::move(sg.graph.graph);
    const uint32_t invoke = g.invoke;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const dsl::Node& n = g.nodes[k];
      if (n.kind == dsl::NodeKind::Apply)
        throw TraceError(n.describe(static_cast<dsl::NodeId>(k)) +
                         ": scan cannot know what a user function returns (it runs only next to the model)");
    }
    keep.push_back(
        std::make_unique<dsl::ValidatedGraph>(dsl::validate(std::move(g), dsl::ValidateOptions().with_limits(limits))));
    const dsl::ValidatedGraph& vg = *keep.back();
    // Constants become meta tensors of their shape and dtype, after validation
    // (which measures their bytes): ops mix them with the model's values. The
    // graph is this function's own copy, and a tensor of the same shape and
    // dtype keeps every validation result true.
    for (size_t k = 0; k < vg.size(); ++k) {
      auto& n = const_cast<dsl::Node&>(vg.node(static_cast<dsl::NodeId>(k)));
      if (n.kind == dsl::NodeKind::Const && n.value.is_tensor())
        n.value = dsl::Value(meta(n.value.as_tensor().sizes().vec(), n.value.as_tensor().scalar_type()));
    }
    providers.push_back(std::make_unique<ScanProvider>(structure, sg.rows, mains, saves));
    auto ev = std::make_unique<dsl::Evaluator>(vg, *providers.back());
    try {
      ev->run();
    } catch (const dsl::EvalError& e) {
      throw TraceError("invoke " + std::to_string(invoke) + ": " + e.what());
    }
    for (size_t k = 0; k < vg.size(); ++k) {
      const dsl::Node& n = vg.node(static_cast<dsl::NodeId>(k));
      if (n.kind == dsl::NodeKind::Const || !n.has_value() || !ev->has_value(static_cast<dsl::NodeId>(k))) continue;
      ScannedValue s = scanned(ev->value(static_cast<dsl::NodeId>(k)));
      s.invoke = invoke;
      s.node = static_cast<uint32_t>(k);
      s.what = label(n);
      s.where = n.loc.str();
      values.push_back(std::move(s));
    }
    if (sg.graph.role != GraphRole::kAuxiliary) mains[invoke] = std::move(ev);
  }
  std::map<std::string, ScannedValue> saved;
  for (const auto& [name, v] : saves) {
    ScannedValue s = scanned(v);
    s.what = "save " + name;
    saved.emplace(name, std::move(s));
  }
  return ScanResult(trace_id, num_edits, std::move(values), std::move(saved));
}

}  // namespace nnsight::tracing
