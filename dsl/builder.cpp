#include "dsl/builder.h"

#include "dsl/analysis.h"

#include "dsl/errors.h"
#include "dsl/ops/registry.h"
#include "dsl/provider_key.h"
#include "dsl/static_kinds.h"

namespace nnsight::dsl {
namespace {
thread_local GraphBuilder* t_current = nullptr;
}  // namespace

GraphBuilder* GraphBuilder::current() { return t_current; }
GraphBuilder::Scope::Scope(GraphBuilder* b) : prev_(t_current) { t_current = b; }
GraphBuilder::Scope::~Scope() { t_current = prev_; }

GraphBuilder::GraphBuilder(uint64_t trace_id, uint32_t invoke) : trace_id_(trace_id) { graph_.invoke = invoke; }

void GraphBuilder::fail(const SourceLoc& loc, const std::string& what) const {
  throw BuildError(loc.str() + ": " + what);
}

void GraphBuilder::check_open(const SourceLoc& loc) const {
  if (finished_) fail(loc, "the graph of invoke " + std::to_string(invoke()) + " is already finished");
}

void GraphBuilder::check_ref(NodeId id, const SourceLoc& loc, const char* what) const {
  if (id >= graph_.nodes.size())
    fail(loc, std::string(what) + " refers to node " + std::to_string(id) + ", which does not exist");
  if (!graph_.nodes[id].has_value())
    fail(loc, std::string(what) + " refers to " + graph_.nodes[id].describe(id) + ", which has no value");
}

NodeId GraphBuilder::push(Node n, KindMask result) {
  graph_.nodes.push_back(std::move(n));
  kinds_.push_back(result);
  return static_cast<NodeId>(graph_.nodes.size() - 1);
}

NodeId GraphBuilder::constant(Value v, SourceLoc loc) {
  check_open(loc);
  Node n;
  n.kind = NodeKind::Const;
  KindMask k = kind_of(v);
  n.value = std::move(v);
  n.loc = std::move(loc);
  return push(std::move(n), k);
}

NodeId GraphBuilder::get(std::string key, StepSpec step, SourceLoc loc) {
  check_open(loc);
  auto pk = parse_provider_key(key);
  if (!pk)
    fail(loc, "'" + key + "' is not a provider key (<module path>.output|.input|.inputs, logits, samples, result)");
  if (pk->kind == KeyKind::ModuleSkip) fail(loc, "'" + key + "' can only be set (envoy.skip(value))");
  if (step.mode == StepSpec::Mode::Iter && !in_iter())
    fail(loc, "a step relative to the iteration is used outside any iteration");
  if (step.value < 0) fail(loc, "negative step " + std::to_string(step.value));
  Node n;
  n.kind = NodeKind::Get;
  const KindMask kinds = provider_key_kinds(pk->kind);
  n.name = std::move(key);
  n.key = std::move(pk);
  n.step = step;
  n.loc = std::move(loc);
  return push(std::move(n), kinds);
}

NodeId GraphBuilder::set(std::string key, StepSpec step, NodeId value, SourceLoc loc) {
  check_open(loc);
  check_ref(value, loc, "set");
  auto pk = parse_provider_key(key);
  if (!pk)
    fail(loc, "'" + key + "' is not a provider key (<module path>.output|.input|.inputs, logits, samples, result)");
  if (step.mode == StepSpec::Mode::Iter && !in_iter())
    fail(loc, "a step relative to the iteration is used outside any iteration");
  if (step.value < 0) fail(loc, "negative step " + std::to_string(step.value));
  Node n;
  n.kind = NodeKind::Set;
  n.name = std::move(key);
  n.key = std::move(pk);
  n.step = step;
  n.args = {value};
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Nothing);
}

NodeId GraphBuilder::op(std::string_view name, std::vector<NodeId> args, SourceLoc loc) {
  check_open(loc);
  const OpDef* def = OpRegistry::global().find(name);
  if (!def) fail(loc, "unknown op '" + std::string(name) + "'");
  for (NodeId a : args) check_ref(a, loc, def->name.c_str());
  std::vector<KindMask> ks;
  ks.reserve(args.size());
  for (NodeId a : args) ks.push_back(kinds_[a]);
  std::string err = check_op_call(*def, ks.data(), args.data(), args.size());
  if (!err.empty()) fail(loc, err);
  Node n;
  n.kind = NodeKind::Op;
  n.name = def->name;
  n.args = std::move(args);
  n.loc = std::move(loc);
  return push(std::move(n), def->result_kind(ks.data(), ks.size()));
}

NodeId GraphBuilder::apply(std::string name, std::vector<NodeId> args, SourceLoc loc) {
  check_open(loc);
  if (name.empty()) fail(loc, "apply of an empty function name");
  for (NodeId a : args) check_ref(a, loc, "apply");
  Node n;
  n.kind = NodeKind::Apply;
  n.name = std::move(name);
  n.args = std::move(args);
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Any);
}

NodeId GraphBuilder::call(std::string module, NodeId arg, SourceLoc loc) {
  check_open(loc);
  if (module.empty()) fail(loc, "call of an empty module path");
  check_ref(arg, loc, "call");
  Node n;
  n.kind = NodeKind::Call;
  n.name = std::move(module);
  n.args = {arg};
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Tensor);
}

NodeId GraphBuilder::grad(NodeId value, SourceLoc loc) {
  check_open(loc);
  check_ref(value, loc, "grad");
  // Checked here, as the user's body runs, not first on the worker: the
  // gradient is that of a value the model holds, as read.
  const NodeId src = grad_source(graph_, value);
  const Node& s = graph_.nodes[src];
  if (s.kind != NodeKind::Get) fail(loc, grad_of_computed_value(graph_, src));
  Node n;
  n.kind = NodeKind::Grad;
  n.args = {value};
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Tensor);
}

NodeId GraphBuilder::backward(NodeId metric, SourceLoc loc) {
  check_open(loc);
  check_ref(metric, loc, "backward");
  Node n;
  n.kind = NodeKind::Backward;
  n.args = {metric};
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Nothing);
}

NodeId GraphBuilder::save(NodeId value, std::string name, SaveMode mode, SourceLoc loc) {
  check_open(loc);
  check_ref(value, loc, "save");
  Node n;
  n.kind = NodeKind::Save;
  n.name = name.empty() ? default_save_name(static_cast<NodeId>(graph_.nodes.size())) : std::move(name);
  const auto [earlier, fresh] = save_names_.emplace(n.name, loc);
  if (!fresh) {
    fail(loc, "a value is already saved under the name '" + n.name + "' (at " + earlier->second.str() + ")");
  }
  n.args = {value};
  n.save_mode = mode;
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Nothing);
}

NodeId GraphBuilder::stop(SourceLoc loc) {
  check_open(loc);
  Node n;
  n.kind = NodeKind::Stop;
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Nothing);
}

NodeId GraphBuilder::external(uint32_t inv, NodeId node, SourceLoc loc) {
  check_open(loc);
  if (inv >= invoke())
    fail(loc, "invoke " + std::to_string(invoke()) + " can only use values of earlier invokes, not of invoke " +
                  std::to_string(inv));
  Node n;
  n.kind = NodeKind::External;
  n.ext_invoke = inv;
  n.ext_node = node;
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Any);
}

bool GraphBuilder::in_iter() const {
  for (const Block& b : blocks_)
    if (b.kind == NodeKind::Iter) return true;
  return false;
}

NodeId GraphBuilder::begin_iter(IterRange range, SourceLoc loc) {
  check_open(loc);
  if (range.start < 0) fail(loc, "iteration starts at negative step " + std::to_string(range.start));
  if (range.stride < 1) fail(loc, "iteration stride must be at least 1, got " + std::to_string(range.stride));
  if (!range.all && range.stop < range.start)
    fail(loc, "iteration range [" + std::to_string(range.start) + ", " + std::to_string(range.stop) +
                  ") ends before it starts");
  Node n;
  n.kind = NodeKind::Iter;
  n.range = range;
  n.loc = std::move(loc);
  NodeId id = push(std::move(n), kinds::Int);
  blocks_.push_back(Block{NodeKind::Iter, id});
  return id;
}

NodeId GraphBuilder::end_iter(SourceLoc loc) {
  check_open(loc);
  if (blocks_.empty() || blocks_.back().kind != NodeKind::Iter)
    fail(loc, "end of an iteration block, but the innermost open block is " +
                  (blocks_.empty() ? std::string("none") : std::string("a condition")));
  blocks_.pop_back();
  Node n;
  n.kind = NodeKind::End;
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Nothing);
}

NodeId GraphBuilder::begin_cond(NodeId condition, SourceLoc loc) {
  check_open(loc);
  check_ref(condition, loc, "cond");
  Node n;
  n.kind = NodeKind::Cond;
  n.args = {condition};
  n.loc = std::move(loc);
  NodeId id = push(std::move(n), kinds::Nothing);
  blocks_.push_back(Block{NodeKind::Cond, id});
  return id;
}

NodeId GraphBuilder::begin_else(SourceLoc loc) {
  check_open(loc);
  if (blocks_.empty() || blocks_.back().kind != NodeKind::Cond) fail(loc, "else outside a condition block");
  if (blocks_.back().has_else) fail(loc, "a condition block has only one else");
  blocks_.back().has_else = true;
  Node n;
  n.kind = NodeKind::Else;
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Nothing);
}

NodeId GraphBuilder::end_cond(SourceLoc loc) {
  check_open(loc);
  if (blocks_.empty() || blocks_.back().kind != NodeKind::Cond)
    fail(loc, "end of a condition block, but the innermost open block is " +
                  (blocks_.empty() ? std::string("none") : std::string("an iteration")));
  blocks_.pop_back();
  Node n;
  n.kind = NodeKind::End;
  n.loc = std::move(loc);
  return push(std::move(n), kinds::Nothing);
}

NodeId GraphBuilder::import(const GraphBuilder& owner, NodeId node, SourceLoc loc) {
  if (&owner == this) {
    check_ref(node, loc, "a proxy");
    return node;
  }
  if (owner.trace_id_ != trace_id_)
    fail(loc, "a proxy of another trace is used here (proxies live only inside their trace)");
  if (owner.invoke() >= invoke())
    fail(loc, "a value of invoke " + std::to_string(owner.invoke()) + " is used in invoke " + std::to_string(invoke()) +
                  "; only earlier invokes can be referenced");
  owner.check_ref(node, loc, "a proxy");
  return external(owner.invoke(), node, std::move(loc));
}

Graph GraphBuilder::finish() {
  if (!blocks_.empty()) {
    const Block& b = blocks_.back();
    fail(graph_.nodes[b.node].loc,
         std::string("this ") + (b.kind == NodeKind::Iter ? "iteration" : "condition") + " block was never closed");
  }
  check_open(SourceLoc{});
  finished_ = true;
  return graph_;
}

std::string GraphBuilder::default_save_name(NodeId save_node) const {
  return "i" + std::to_string(invoke()) + ".n" + std::to_string(save_node);
}

}  // namespace nnsight::dsl
