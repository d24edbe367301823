#include "dsl/validate.h"

#include "dsl/analysis.h"
#include "dsl/binary_codec.h"
#include "dsl/dtype.h"
#include "dsl/errors.h"
#include "dsl/provider_key.h"
#include "dsl/static_kinds.h"
#include "dsl/utf8.h"

#include <unordered_set>

namespace nnsight::dsl {
namespace {

class Validator {
 public:
  Validator(const Graph& g, const ValidateOptions& o) : g_(g), o_(o), lim_(o.limits) {}

  [[noreturn]] void fail(NodeId id, const std::string& what) const {
    const Node& n = g_.nodes[id];
    throw ValidationError(id, n.loc, n.describe(id) + ": " + what);
  }

  void run(std::vector<NodeId>& block_end, std::vector<NodeId>& else_of, std::vector<const OpDef*>& ops,
           std::vector<KindMask>& kinds) {
    size_t n = g_.nodes.size();
    if (n > lim_.max_nodes)
      throw ValidationError(
          0, SourceLoc{},
          "graph of " + std::to_string(n) + " nodes exceeds the limit of " + std::to_string(lim_.max_nodes));
    block_end.assign(n, kNoNode);
    else_of.assign(n, kNoNode);
    ops.assign(n, nullptr);
    kinds.assign(n, kinds::Nothing);
    for (NodeId i = 0; i < n; ++i) node(i, block_end, else_of, ops, kinds);
    if (!blocks_.empty()) {
      NodeId open = blocks_.back().node;
      fail(open, "block is never closed (missing end)");
    }
  }

 private:
  struct Block {
    NodeId node;
    bool is_iter;
    bool has_else = false;
    bool has_direct_access = false;  // an iteration-relative Get/Set directly in the body
    uint64_t steps_product = 1;      // iterations of this and enclosing bounded Iters
  };

  void check_string(NodeId id, const std::string& s, const char* what) const {
    if (s.size() > lim_.max_string_length)
      fail(id, std::string(what) + " length " + std::to_string(s.size()) + " exceeds the limit of " +
                   std::to_string(lim_.max_string_length));
    if (!valid_utf8(s)) fail(id, std::string(what) + " is not valid UTF-8");
  }

  void check_tensor(NodeId id, const at::Tensor& t, const char* what) {
    if (!t.defined()) return;
    if (!dtype_code(t.scalar_type()))
      fail(id, std::string(what) + " has dtype " + c10::toString(t.scalar_type()) + ", which graphs cannot carry");
    if (static_cast<uint64_t>(t.dim()) > lim_.max_tensor_rank)
      fail(id, std::string(what) + " has rank " + std::to_string(t.dim()) + ", over the limit of " +
                   std::to_string(lim_.max_tensor_rank));
    if (static_cast<uint64_t>(t.numel()) > lim_.max_tensor_elements)
      fail(id, std::string(what) + " has " + std::to_string(t.numel()) + " elements, over the limit of " +
                   std::to_string(lim_.max_tensor_elements));
    constant_bytes_ += static_cast<uint64_t>(t.numel()) * t.element_size();
    if (constant_bytes_ > lim_.max_constant_bytes)
      fail(id, "constant tensors total more than the limit of " + std::to_string(lim_.max_constant_bytes) + " bytes");
  }

  void check_value(NodeId id, const Value& v, uint64_t depth) {
    if (depth > lim_.max_depth) fail(id, "value nested deeper than the limit of " + std::to_string(lim_.max_depth));
    switch (v.kind()) {
      case ValueKind::Tensor:
        check_tensor(id, v.as_tensor(), "constant tensor");
        break;
      case ValueKind::List:
        if (v.as_list().size() > lim_.max_list_length) fail(id, "list exceeds the list length limit");
        for (const Value& x : v.as_list()) check_value(id, x, depth + 1);
        break;
      case ValueKind::Tuple:
        if (v.as_tuple().size() > lim_.max_list_length) fail(id, "tuple exceeds the list length limit");
        for (const at::Tensor& t : v.as_tuple()) check_tensor(id, t, "tuple element");
        break;
      case ValueKind::Index:
        if (v.as_index().size() > lim_.max_list_length) fail(id, "index exceeds the list length limit");
        for (const IndexItem& it : v.as_index()) {
          if (it.kind == IndexItem::Kind::Slice && it.step <= 0)
            fail(id, "slice step must be positive, got " + std::to_string(it.step));
          if (it.kind == IndexItem::Kind::Tensor) {
            check_tensor(id, it.tensor, "index tensor");
            at::ScalarType st = it.tensor.scalar_type();
            if (st != at::kBool && st != at::kByte && st != at::kLong && st != at::kInt)
              fail(id, "an index tensor must be bool, uint8, int32 or int64, got " + dtype_name(st));
          }
        }
        break;
      case ValueKind::Dtype:
        if (!dtype_code(v.as_dtype())) fail(id, "unsupported dtype");
        break;
      case ValueKind::String:
        check_string(id, v.as_string(), "string constant");
        break;
      default:
        break;
    }
  }

  void check_args(NodeId id, const std::vector<NodeId>& args, size_t expected) const {
    if (expected != SIZE_MAX && args.size() != expected)
      fail(id, "takes " + std::to_string(expected) + " argument" + (expected == 1 ? "" : "s") + ", got " +
                   std::to_string(args.size()));
    if (args.size() > lim_.max_list_length) fail(id, "too many arguments");
    for (size_t k = 0; k < args.size(); ++k) {
      NodeId a = args[k];
      if (a >= id)
        fail(id, "argument " + std::to_string(k) + " refers to node " + std::to_string(a) +
                     ", which does not come before it (references must point backwards)");
      if (!g_.nodes[a].has_value())
        fail(id, "argument " + std::to_string(k) + " refers to " + g_.nodes[a].describe(a) + ", which has no value");
    }
  }

  bool in_iter() const {
    for (const Block& b : blocks_)
      if (b.is_iter) return true;
    return false;
  }

  void check_step(NodeId id, const StepSpec& s) {
    if (s.value < 0) fail(id, "step " + std::to_string(s.value) + " is negative");
    if (s.value > lim_.max_steps)
      fail(id, "step " + std::to_string(s.value) + " exceeds the limit of " + std::to_string(lim_.max_steps));
    if (s.mode == StepSpec::Mode::Iter) {
      if (!in_iter()) fail(id, "a step relative to the iteration is used outside any iter block");
      if (!blocks_.back().is_iter) return;
      blocks_.back().has_direct_access = true;
    }
  }

  void check_key(NodeId id, const Node& n, KindMask* kind) const {
    check_string(id, n.name, "key");
    if (!n.key)
      fail(id,
           "'" + n.name + "' is not a provider key (<module path>.output, .input, .inputs, logits, samples, result)");
    if (kind) *kind = provider_key_kinds(n.key->kind);
  }

  void node(NodeId id, std::vector<NodeId>& block_end, std::vector<NodeId>& else_of, std::vector<const OpDef*>& ops,
            std::vector<KindMask>& kinds) {
    const Node& n = g_.nodes[id];
    check_string(id, n.loc.file, "source file name");
    switch (n.kind) {
      case NodeKind::Const:
        check_args(id, n.args, 0);
        check_value(id, n.value, 0);
        kinds[id] = kind_of(n.value);
        break;
      case NodeKind::Get:
        check_args(id, n.args, 0);
        check_key(id, n, &kinds[id]);
        if (n.key->kind == KeyKind::ModuleSkip) fail(id, "'" + n.name + "' can only be set (envoy.skip(value))");
        check_step(id, n.step);
        break;
      case NodeKind::Set:
        check_args(id, n.args, 1);
        check_key(id, n, nullptr);
        check_step(id, n.step);
        break;
      case NodeKind::Op: {
        check_string(id, n.name, "op name");
        const OpDef* def = OpRegistry::global().find(n.name);
        if (!def) fail(id, "unknown op '" + n.name + "'");
        check_args(id, n.args, SIZE_MAX);
        std::vector<KindMask> ks;
        ks.reserve(n.args.size());
        for (NodeId a : n.args) ks.push_back(kinds[a]);
        std::string err = check_op_call(*def, ks.data(), n.args.data(), n.args.size());
        if (!err.empty()) fail(id, err);
        ops[id] = def;
        kinds[id] = def->result_kind(ks.data(), ks.size());
        break;
      }
      case NodeKind::Grad: {
        check_args(id, n.args, 1);
        // The gradient is that of a value the model holds, as read: a
        // module's output or input, the logits, or an element of a module's
        // tuple (not a value computed from them, which the model never sees).
        const NodeId src = n.args[0];
        const Node* s = &g_.nodes[grad_source(g_, src)];
        const ProviderKey* pk = s->kind == NodeKind::Get && s->key ? &*s->key : nullptr;
        if (!pk || (pk->kind != KeyKind::ModuleOutput && pk->kind != KeyKind::ModuleInput &&
                    pk->kind != KeyKind::ModuleInputs && pk->kind != KeyKind::Logits))
          fail(id, grad_of_computed_value(g_, src));
        if ((kinds[src] & kinds::Tensor) == 0)
          fail(id, "grad() of a " + describe_mask(kinds[src]) + ": take an element of the tuple first");
        if (!seen_backward_)
          fail(id, "grad() is read before any backward(): gradients exist once metric.backward() has run");
        kinds[id] = kinds::Tensor;
        break;
      }
      case NodeKind::Backward:
        check_args(id, n.args, 1);
        if ((kinds[n.args[0]] & kinds::Tensor) == 0)
          fail(id, "backward() of a " + describe_mask(kinds[n.args[0]]) + ": it needs a one-element tensor");
        seen_backward_ = true;
        break;
      case NodeKind::Call:
        // Whether the module exists and can be called is the model's to say
        // (the tracing layer checks it against the model's structure).
        check_string(id, n.name, "module path");
        if (n.name.empty()) fail(id, "empty module path");
        check_args(id, n.args, 1);
        if ((kinds[n.args[0]] & kinds::Tensor) == 0)
          fail(id, "a module is called on a tensor, not a " + describe_mask(kinds[n.args[0]]));
        kinds[id] = kinds::Tensor;
        break;
      case NodeKind::Apply:
        check_string(id, n.name, "function name");
        if (n.name.empty()) fail(id, "empty function name");
        check_args(id, n.args, SIZE_MAX);
        if (o_.functions) {
          const FunctionDef* f = o_.functions->find(n.name);
          if (!f) fail(id, "function '" + n.name + "' is not registered on this worker");
          if (n.args.size() < f->min_args || n.args.size() > f->max_args)
            fail(id,
                 "function '" + n.name + "' takes " +
                     (f->min_args == f->max_args ? std::to_string(f->min_args)
                                                 : std::to_string(f->min_args) + " to " + std::to_string(f->max_args)) +
                     " arguments, got " + std::to_string(n.args.size()));
        }
        kinds[id] = kinds::Any;
        break;
      case NodeKind::Save:
        check_args(id, n.args, 1);
        check_string(id, n.name, "save name");
        if (n.name.empty()) fail(id, "empty save name");
        if (!save_names_.insert(n.name).second) fail(id, "save name '" + n.name + "' is used twice");
        break;
      case NodeKind::Iter: {
        check_args(id, n.args, 0);
        const IterRange& r = n.range;
        if (r.start < 0 || r.start > lim_.max_steps)
          fail(id, "iteration start " + std::to_string(r.start) + " is outside [0, " + std::to_string(lim_.max_steps) +
                       "]");
        if (r.stride < 1 || r.stride > lim_.max_steps)
          fail(id, "iteration stride " + std::to_string(r.stride) + " is outside [1, " +
                       std::to_string(lim_.max_steps) + "]");
        uint64_t product = blocks_.empty() ? 1 : blocks_.back().steps_product;
        if (!r.all) {
          if (r.stop < r.start || r.stop > lim_.max_steps)
            fail(id, "iteration stop " + std::to_string(r.stop) + " is outside [start " + std::to_string(r.start) +
                         ", " + std::to_string(lim_.max_steps) + "]");
          uint64_t count = static_cast<uint64_t>((r.stop - r.start + r.stride - 1) / r.stride);
          product *= std::max<uint64_t>(count, 1);  // both factors <= max_steps (2^20 default): no overflow
          if (product > static_cast<uint64_t>(lim_.max_steps))
            fail(id, "nested iterations run " + std::to_string(product) + " times, over the limit of " +
                         std::to_string(lim_.max_steps));
        }
        push_block(id, true, product);
        kinds[id] = kinds::Int;
        break;
      }
      case NodeKind::Cond:
        check_args(id, n.args, 1);
        push_block(id, false, blocks_.empty() ? 1 : blocks_.back().steps_product);
        break;
      case NodeKind::Else: {
        check_args(id, n.args, 0);
        if (blocks_.empty() || blocks_.back().is_iter) fail(id, "else outside a cond block");
        if (blocks_.back().has_else) fail(id, "a cond block has a second else");
        blocks_.back().has_else = true;
        else_of[blocks_.back().node] = id;
        break;
      }
      case NodeKind::End: {
        check_args(id, n.args, 0);
        if (blocks_.empty()) fail(id, "end without an open iter or cond block");
        Block b = blocks_.back();
        blocks_.pop_back();
        const Node& open = g_.nodes[b.node];
        if (b.is_iter && open.range.all && !b.has_direct_access)
          fail(b.node,
               "an iteration over all steps needs a get or set at the iteration's step directly in "
               "its body (not inside a cond), so that each iteration waits for the model");
        block_end[b.node] = id;
        break;
      }
      case NodeKind::Stop:
        check_args(id, n.args, 0);
        break;
      case NodeKind::External:
        check_args(id, n.args, 0);
        if (n.ext_invoke >= g_.invoke)
          fail(id, "refers to invoke " + std::to_string(n.ext_invoke) + ", but graph of invoke " +
                       std::to_string(g_.invoke) + " may only refer to earlier invokes");
        kinds[id] = kinds::Any;
        break;
    }
  }

  void push_block(NodeId id, bool is_iter, uint64_t product) {
    if (blocks_.size() + 1 > lim_.max_depth)
      fail(id, "blocks nested deeper than the limit of " + std::to_string(lim_.max_depth));
    Block b;
    b.node = id;
    b.is_iter = is_iter;
    b.steps_product = product;
    blocks_.push_back(b);
  }

  const Graph& g_;
  const ValidateOptions& o_;
  const Limits& lim_;
  std::vector<Block> blocks_;
  std::unordered_set<std::string> save_names_;
  bool seen_backward_ = false;  // a Backward node came earlier in program order
  uint64_t constant_bytes_ = 0;
};

}  // namespace

ValidatedGraph validate(Graph g, const ValidateOptions& options) {
  ValidatedGraph out;
  // A graph made by hand (not by the builder or a decoder) has its keys as text only.
  for (Node& n : g.nodes)
    if ((n.kind == NodeKind::Get || n.kind == NodeKind::Set) && !n.key) n.key = parse_provider_key(n.name);
  Validator v(g, options);
  v.run(out.block_end_, out.else_of_, out.ops_, out.kinds_);
  uint64_t size = encoded_size(g);
  if (size > options.limits.max_encoded_bytes)
    throw ValidationError(0, SourceLoc{},
                          "graph encodes to " + std::to_string(size) + " bytes, over the limit of " +
                              std::to_string(options.limits.max_encoded_bytes));
  out.encoded_size_ = size;
  out.graph_ = std::move(g);
  return out;
}

void validate_trace(const std::vector<const Graph*>& graphs) {
  for (size_t i = 0; i < graphs.size(); ++i) {
    const Graph& g = *graphs[i];
    if (g.invoke != i)
      throw ValidationError(
          0, SourceLoc{}, "graph " + std::to_string(i) + " of the trace says it is invoke " + std::to_string(g.invoke));
    for (NodeId id = 0; id < g.nodes.size(); ++id) {
      const Node& n = g.nodes[id];
      if (n.kind != NodeKind::External) continue;
      std::string where = "invoke " + std::to_string(i) + ", " + n.describe(id);
      if (n.ext_invoke >= i)
        throw ValidationError(id, n.loc,
                              where + ": refers to invoke " + std::to_string(n.ext_invoke) + ", which is not earlier");
      const Graph& other = *graphs[n.ext_invoke];
      if (n.ext_node >= other.nodes.size())
        throw ValidationError(id, n.loc,
                              where + ": refers to node " + std::to_string(n.ext_node) + " of invoke " +
                                  std::to_string(n.ext_invoke) + ", which has only " +
                                  std::to_string(other.nodes.size()) + " nodes");
      const Node& target = other.nodes[n.ext_node];
      if (!target.has_value())
        throw ValidationError(id, n.loc,
                              where + ": refers to invoke " + std::to_string(n.ext_invoke) + " " +
                                  target.describe(n.ext_node) + ", which has no value");
    }
  }
}

}  // namespace nnsight::dsl
