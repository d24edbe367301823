// The public Proxy API (include/nnsight/proxy.hpp), recorded through
// dsl::GraphBuilder.
#include <nnsight/proxy.hpp>

#include "dsl/builder.h"
#include "dsl/errors.h"

#include <ATen/ATen.h>

namespace nnsight {

using dsl::BuildError;
using dsl::GraphBuilder;
using dsl::NodeId;
using dsl::Value;

// Friend of Proxy: builds proxies with their private fields set.
class ProxyAccess {
 public:
  static Proxy make(std::shared_ptr<GraphBuilder> b, NodeId id) { return Proxy(std::move(b), id); }
  static Proxy make_indexed(std::shared_ptr<GraphBuilder> b, NodeId id, NodeId base, NodeId index) {
    Proxy p(std::move(b), id);
    p.indexed_ = true;
    p.index_base_ = base;
    p.index_node_ = index;
    return p;
  }
};

namespace {

std::shared_ptr<GraphBuilder> shared(GraphBuilder* b, const SourceLoc& loc) {
  try {
    return b->shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    throw BuildError(loc.str() + ": the current graph builder is not owned by a std::shared_ptr");
  }
}

// Where new nodes go: this thread's current builder while a trace body runs,
// else the builder of the first proxy involved.
std::shared_ptr<GraphBuilder> target(const SourceLoc& loc, std::initializer_list<const Proxy*> proxies) {
  if (GraphBuilder* cur = GraphBuilder::current()) return shared(cur, loc);
  for (const Proxy* p : proxies)
    if (p && p->valid()) return p->builder();
  throw BuildError(loc.str() + ": no trace is being recorded here (an operation needs a proxy or an active trace)");
}

const Proxy* proxy_in(const Operand& o) { return o.kind() == Operand::Kind::Proxy ? &o.proxy() : nullptr; }
const Proxy* proxy_in(const IndexArg& i) { return i.kind() == IndexArg::Kind::Proxy ? &i.proxy() : nullptr; }

// A snapshot of a user tensor: later in-place changes to theirs do not leak
// into the graph.
at::Tensor snapshot(const at::Tensor& t, const SourceLoc& loc) {
  if (!t.defined()) throw BuildError(loc.str() + ": an undefined tensor is used as an operand");
  return t.detach().clone();
}

// Records what one user expression needs, all at that expression's location.
struct Rec {
  std::shared_ptr<GraphBuilder> b;
  SourceLoc loc;

  Rec(SourceLoc l, std::initializer_list<const Proxy*> proxies) : b(target(l, proxies)), loc(std::move(l)) {}
  Rec(SourceLoc l, std::shared_ptr<GraphBuilder> builder) : b(std::move(builder)), loc(std::move(l)) {}

  NodeId p(const Proxy& x) {
    if (!x.valid()) throw BuildError(loc.str() + ": an empty proxy (never assigned a value) is used");
    return b->import(*x.builder(), x.node(), loc);
  }
  NodeId o(const Operand& x) {
    switch (x.kind()) {
      case Operand::Kind::Proxy:
        return p(x.proxy());
      case Operand::Kind::Tensor:
        return b->constant(Value(snapshot(x.tensor(), loc)), loc);
      case Operand::Kind::Int:
        return b->constant(Value::integer(x.int_value()), loc);
      case Operand::Kind::Double:
        return b->constant(Value::real(x.double_value()), loc);
      case Operand::Kind::Bool:
        return b->constant(Value::boolean(x.bool_value()), loc);
    }
    throw BuildError(loc.str() + ": bad operand");
  }
  NodeId i(int64_t v) { return b->constant(Value::integer(v), loc); }
  NodeId d(double v) { return b->constant(Value::real(v), loc); }
  NodeId flag(bool v) { return b->constant(Value::boolean(v), loc); }
  NodeId none() { return b->constant(Value(), loc); }
  NodeId str(const std::string& s) { return b->constant(Value::string(s), loc); }
  NodeId ints(const std::vector<int64_t>& v) {
    std::vector<Value> items;
    items.reserve(v.size());
    for (int64_t x : v) items.push_back(Value::integer(x));
    return b->constant(Value::list(std::move(items)), loc);
  }
  NodeId dtype(at::ScalarType t) { return b->constant(Value::dtype(t), loc); }

  Proxy op(const char* name, std::vector<NodeId> args) {
    NodeId id = b->op(name, std::move(args), loc);
    return ProxyAccess::make(b, id);
  }

  dsl::IndexItem item(const IndexArg& a) {
    switch (a.kind()) {
      case IndexArg::Kind::Int:
        return dsl::IndexItem::make_int(a.int_value());
      case IndexArg::Kind::Slice:
        if (a.slice().step <= 0)
          throw BuildError(loc.str() + ": slice step must be positive, got " + std::to_string(a.slice().step));
        return dsl::IndexItem::make_slice(a.slice().start, a.slice().stop, a.slice().step);
      case IndexArg::Kind::Ellipsis:
        return dsl::IndexItem::make_ellipsis();
      case IndexArg::Kind::None:
        return dsl::IndexItem::make_none();
      case IndexArg::Kind::Tensor:
        return dsl::IndexItem::make_tensor(snapshot(a.tensor(), loc));
      case IndexArg::Kind::Proxy:
        break;
    }
    throw BuildError(loc.str() + ": bad index item");
  }

  // The index as one node: an int constant, a proxy's node, an index-spec
  // constant, or (when proxies are mixed with static items) a list of parts.
  NodeId index(const IndexArg* items, size_t n) {
    if (n == 1 && items[0].kind() == IndexArg::Kind::Int) return i(items[0].int_value());
    if (n == 1 && items[0].kind() == IndexArg::Kind::Proxy) return p(items[0].proxy());
    std::vector<NodeId> parts;
    dsl::IndexSpec run;
    bool any_proxy = false;
    for (size_t k = 0; k < n; ++k) {
      if (items[k].kind() != IndexArg::Kind::Proxy) {
        run.push_back(item(items[k]));
        continue;
      }
      any_proxy = true;
      if (!run.empty()) parts.push_back(b->constant(Value::index(std::move(run)), loc));
      run.clear();
      parts.push_back(p(items[k].proxy()));
    }
    if (!any_proxy) return b->constant(Value::index(std::move(run)), loc);
    if (!run.empty()) parts.push_back(b->constant(Value::index(std::move(run)), loc));
    return b->op("list", std::move(parts), loc);
  }
};

Proxy binary(const char* name, const Operand& a, const Operand& b) {
  Rec r(a.site().loc(), {proxy_in(a), proxy_in(b)});
  NodeId x = r.o(a);
  NodeId y = r.o(b);
  return r.op(name, {x, y});
}

Proxy unary(const Proxy& self, const char* name, const CallSite& site) {
  Rec r(site.loc(), {&self});
  return r.op(name, {r.p(self)});
}

Proxy join(const char* name, const std::vector<const Operand*>& items, int64_t dim, const CallSite& site) {
  const Proxy* first = nullptr;
  for (const Operand* o : items)
    if (!first) first = proxy_in(*o);
  Rec r(site.loc(), {first});
  std::vector<NodeId> nodes;
  nodes.reserve(items.size());
  for (const Operand* o : items) nodes.push_back(r.o(*o));
  NodeId list = r.b->op("list", std::move(nodes), r.loc);
  return r.op(name, {list, r.i(dim)});
}

Saved save_impl(const Proxy& self, const std::string& name, dsl::SaveMode mode, const CallSite& site) {
  Rec r(site.loc(), {&self});
  NodeId v = r.p(self);
  NodeId s = r.b->save(v, name, mode, r.loc);
  return Saved(r.b->graph().nodes[s].name);
}

}  // namespace

Proxy::Proxy(std::shared_ptr<dsl::GraphBuilder> builder, uint32_t node) : builder_(std::move(builder)), node_(node) {}

void Proxy::operator=(const Operand& value) && {
  SourceLoc loc = value.site().loc();
  if (!valid()) throw BuildError(loc.str() + ": assignment to an empty proxy");
  if (indexed_) {
    // base[index] = value. The read of base[index] recorded for this proxy
    // stays in the graph (another copy of the proxy may still refer to it);
    // it is a cheap view and runs at the same point.
    Rec r(loc, builder_);
    NodeId v = r.o(value);
    r.b->op("setitem", {index_base_, index_node_, v}, loc);
    return;
  }
  const dsl::Node& n = builder_->graph().nodes.at(node_);
  if (n.kind != dsl::NodeKind::Get) {
    throw BuildError(loc.str() +
                     ": only a module input/output (or logits, samples) proxy, or an indexed proxy "
                     "x[i], can be assigned to; this one is " +
                     n.describe(node_));
  }
  std::string key = n.name;
  dsl::StepSpec step = n.step;
  Rec r(loc, {this});
  NodeId v = r.o(value);
  r.b->set(std::move(key), step, v, loc);
}

Proxy Proxy::operator[](const IndexArg& index) const {
  Rec r(index.site().loc(), {this, proxy_in(index)});
  NodeId self = r.p(*this);
  NodeId idx = r.index(&index, 1);
  NodeId id = r.b->op("getitem", {self, idx}, r.loc);
  return ProxyAccess::make_indexed(r.b, id, self, idx);
}

Proxy Proxy::operator[](std::initializer_list<IndexArg> index) const {
  if (index.size() == 0) throw BuildError("an index needs at least one item");
  return this->index(index, index.begin()->site());
}

Proxy Proxy::index(std::initializer_list<IndexArg> index, CallSite site) const {
  const Proxy* first = nullptr;
  for (const IndexArg& a : index)
    if (!first) first = proxy_in(a);
  Rec r(site.loc(), {this, first});
  NodeId self = r.p(*this);
  NodeId idx = r.index(index.begin(), index.size());
  NodeId id = r.b->op("getitem", {self, idx}, r.loc);
  return ProxyAccess::make_indexed(r.b, id, self, idx);
}

void Proxy::index_put(std::initializer_list<IndexArg> index, const Operand& value, CallSite site) const {
  const Proxy* first = nullptr;
  for (const IndexArg& a : index)
    if (!first) first = proxy_in(a);
  Rec r(site.loc(), {this, first});
  NodeId self = r.p(*this);
  NodeId idx = r.index(index.begin(), index.size());
  NodeId v = r.o(value);
  r.b->op("setitem", {self, idx, v}, r.loc);
}

Proxy Proxy::clone(CallSite site) const { return unary(*this, "clone", site); }
Proxy Proxy::detach(CallSite site) const { return unary(*this, "detach", site); }
Proxy Proxy::contiguous(CallSite site) const { return unary(*this, "contiguous", site); }
Proxy Proxy::item(CallSite site) const { return unary(*this, "item", site); }
Proxy Proxy::to(at::ScalarType dtype, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("to", {self, r.dtype(dtype)});
}

Proxy Proxy::reshape(std::vector<int64_t> shape, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("reshape", {self, r.ints(shape)});
}
Proxy Proxy::view(std::vector<int64_t> shape, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("view", {self, r.ints(shape)});
}
Proxy Proxy::transpose(int64_t dim0, int64_t dim1, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  NodeId a = r.i(dim0);
  return r.op("transpose", {self, a, r.i(dim1)});
}
Proxy Proxy::permute(std::vector<int64_t> dims, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("permute", {self, r.ints(dims)});
}
Proxy Proxy::unsqueeze(int64_t dim, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("unsqueeze", {self, r.i(dim)});
}
Proxy Proxy::squeeze(CallSite site) const { return unary(*this, "squeeze", site); }
Proxy Proxy::squeeze(int64_t dim, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("squeeze", {self, r.i(dim)});
}
Proxy Proxy::flatten(int64_t start_dim, int64_t end_dim, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  NodeId a = r.i(start_dim);
  return r.op("flatten", {self, a, r.i(end_dim)});
}
Proxy Proxy::size(int64_t dim, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("size", {self, r.i(dim)});
}

namespace {
Proxy reduce(const Proxy& self, const char* name, NodeId (Rec::*dim)(int64_t), int64_t d, bool keepdim,
             const CallSite& site) {
  Rec r(site.loc(), {&self});
  NodeId s = r.p(self);
  NodeId dn = (r.*dim)(d);
  return r.op(name, {s, dn, r.flag(keepdim)});
}
Proxy reduce_dims(const Proxy& self, const char* name, const std::vector<int64_t>& dims, bool keepdim,
                  const CallSite& site) {
  Rec r(site.loc(), {&self});
  NodeId s = r.p(self);
  NodeId dn = r.ints(dims);
  return r.op(name, {s, dn, r.flag(keepdim)});
}
}  // namespace

Proxy Proxy::sum(CallSite site) const { return unary(*this, "sum", site); }
Proxy Proxy::sum(int64_t dim, bool keepdim, CallSite site) const {
  return reduce(*this, "sum", &Rec::i, dim, keepdim, site);
}
Proxy Proxy::sum(std::vector<int64_t> dims, bool keepdim, CallSite site) const {
  return reduce_dims(*this, "sum", dims, keepdim, site);
}
Proxy Proxy::mean(CallSite site) const { return unary(*this, "mean", site); }
Proxy Proxy::mean(int64_t dim, bool keepdim, CallSite site) const {
  return reduce(*this, "mean", &Rec::i, dim, keepdim, site);
}
Proxy Proxy::mean(std::vector<int64_t> dims, bool keepdim, CallSite site) const {
  return reduce_dims(*this, "mean", dims, keepdim, site);
}
Proxy Proxy::max(CallSite site) const { return unary(*this, "max", site); }
Proxy Proxy::max(int64_t dim, bool keepdim, CallSite site) const {
  return reduce(*this, "max", &Rec::i, dim, keepdim, site);
}
Proxy Proxy::min(CallSite site) const { return unary(*this, "min", site); }
Proxy Proxy::min(int64_t dim, bool keepdim, CallSite site) const {
  return reduce(*this, "min", &Rec::i, dim, keepdim, site);
}
Proxy Proxy::argmax(CallSite site) const { return unary(*this, "argmax", site); }
Proxy Proxy::argmax(int64_t dim, bool keepdim, CallSite site) const {
  return reduce(*this, "argmax", &Rec::i, dim, keepdim, site);
}
Proxy Proxy::topk(int64_t k, int64_t dim, bool largest, bool sorted, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  NodeId kn = r.i(k);
  NodeId dn = r.i(dim);
  NodeId ln = r.flag(largest);
  return r.op("topk", {self, kn, dn, ln, r.flag(sorted)});
}
Proxy Proxy::norm(double p, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("norm", {self, r.d(p)});
}
Proxy Proxy::norm(double p, std::vector<int64_t> dims, bool keepdim, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  NodeId pn = r.d(p);
  NodeId dn = r.ints(dims);
  return r.op("norm", {self, pn, dn, r.flag(keepdim)});
}

Proxy Proxy::abs(CallSite site) const { return unary(*this, "abs", site); }
Proxy Proxy::exp(CallSite site) const { return unary(*this, "exp", site); }
Proxy Proxy::log(CallSite site) const { return unary(*this, "log", site); }
Proxy Proxy::sqrt(CallSite site) const { return unary(*this, "sqrt", site); }
Proxy Proxy::tanh(CallSite site) const { return unary(*this, "tanh", site); }
Proxy Proxy::sigmoid(CallSite site) const { return unary(*this, "sigmoid", site); }
Proxy Proxy::relu(CallSite site) const { return unary(*this, "relu", site); }
Proxy Proxy::gelu(const std::string& approximate, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("gelu", {self, r.str(approximate)});
}
Proxy Proxy::softmax(int64_t dim, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("softmax", {self, r.i(dim)});
}
Proxy Proxy::log_softmax(int64_t dim, CallSite site) const {
  Rec r(site.loc(), {this});
  NodeId self = r.p(*this);
  return r.op("log_softmax", {self, r.i(dim)});
}
Proxy Proxy::pow(const Operand& exponent) const {
  return binary("pow", Operand(*this, exponent.site().file(), exponent.site().line()), exponent);
}
Proxy Proxy::matmul(const Operand& other) const {
  return binary("matmul", Operand(*this, other.site().file(), other.site().line()), other);
}
Proxy Proxy::eq(const Operand& o) const { return binary("eq", Operand(*this, o.site().file(), o.site().line()), o); }
Proxy Proxy::ne(const Operand& o) const { return binary("ne", Operand(*this, o.site().file(), o.site().line()), o); }
Proxy Proxy::lt(const Operand& o) const { return binary("lt", Operand(*this, o.site().file(), o.site().line()), o); }
Proxy Proxy::le(const Operand& o) const { return binary("le", Operand(*this, o.site().file(), o.site().line()), o); }
Proxy Proxy::gt(const Operand& o) const { return binary("gt", Operand(*this, o.site().file(), o.site().line()), o); }
Proxy Proxy::ge(const Operand& o) const { return binary("ge", Operand(*this, o.site().file(), o.site().line()), o); }

Proxy Proxy::grad(CallSite site) const {
  Rec r(site.loc(), {this});
  const NodeId v = r.p(*this);
  return ProxyAccess::make(r.b, r.b->grad(v, r.loc));
}

void Proxy::backward(CallSite site) const {
  Rec r(site.loc(), {this});
  r.b->backward(r.p(*this), r.loc);
}

Saved Proxy::save(CallSite site) const { return save_impl(*this, "", dsl::SaveMode::Replace, site); }
Saved Proxy::save(const std::string& name, CallSite site) const {
  if (name.empty()) throw BuildError(site.loc().str() + ": empty save name");
  return save_impl(*this, name, dsl::SaveMode::Replace, site);
}
Saved Proxy::save_each(CallSite site) const { return save_impl(*this, "", dsl::SaveMode::Append, site); }
Saved Proxy::save_each(const std::string& name, CallSite site) const {
  if (name.empty()) throw BuildError(site.loc().str() + ": empty save name");
  return save_impl(*this, name, dsl::SaveMode::Append, site);
}

Proxy operator+(const Operand& a, const Operand& b) { return binary("add", a, b); }
Proxy operator-(const Operand& a, const Operand& b) { return binary("sub", a, b); }
Proxy operator*(const Operand& a, const Operand& b) { return binary("mul", a, b); }
Proxy operator/(const Operand& a, const Operand& b) { return binary("div", a, b); }
Proxy operator<(const Operand& a, const Operand& b) { return binary("lt", a, b); }
Proxy operator<=(const Operand& a, const Operand& b) { return binary("le", a, b); }
Proxy operator>(const Operand& a, const Operand& b) { return binary("gt", a, b); }
Proxy operator>=(const Operand& a, const Operand& b) { return binary("ge", a, b); }
Proxy operator==(const Operand& a, const Operand& b) { return binary("eq", a, b); }
Proxy operator!=(const Operand& a, const Operand& b) { return binary("ne", a, b); }
Proxy operator-(const Operand& a) {
  Rec r(a.site().loc(), {proxy_in(a)});
  return r.op("neg", {r.o(a)});
}

Proxy cat(std::initializer_list<Operand> tensors, int64_t dim, CallSite site) {
  std::vector<const Operand*> items;
  for (const Operand& o : tensors) items.push_back(&o);
  return join("cat", items, dim, site);
}
Proxy cat(const std::vector<Proxy>& tensors, int64_t dim, CallSite site) {
  std::vector<Operand> ops;
  ops.reserve(tensors.size());
  for (const Proxy& p : tensors) ops.emplace_back(p, site.file(), site.line());
  std::vector<const Operand*> items;
  for (const Operand& o : ops) items.push_back(&o);
  return join("cat", items, dim, site);
}
Proxy stack(std::initializer_list<Operand> tensors, int64_t dim, CallSite site) {
  std::vector<const Operand*> items;
  for (const Operand& o : tensors) items.push_back(&o);
  return join("stack", items, dim, site);
}
Proxy stack(const std::vector<Proxy>& tensors, int64_t dim, CallSite site) {
  std::vector<Operand> ops;
  ops.reserve(tensors.size());
  for (const Proxy& p : tensors) ops.emplace_back(p, site.file(), site.line());
  std::vector<const Operand*> items;
  for (const Operand& o : ops) items.push_back(&o);
  return join("stack", items, dim, site);
}

Proxy where(const Operand& condition, const Operand& a, const Operand& b) {
  Rec r(condition.site().loc(), {proxy_in(condition), proxy_in(a), proxy_in(b)});
  NodeId c = r.o(condition);
  NodeId x = r.o(a);
  NodeId y = r.o(b);
  return r.op("where", {c, x, y});
}
Proxy matmul(const Operand& a, const Operand& b) { return binary("matmul", a, b); }
Proxy outer(const Operand& a, const Operand& b) { return binary("outer", a, b); }
Proxy zeros_like(const Operand& like) {
  Rec r(like.site().loc(), {proxy_in(like)});
  return r.op("zeros_like", {r.o(like)});
}
Proxy ones_like(const Operand& like) {
  Rec r(like.site().loc(), {proxy_in(like)});
  return r.op("ones_like", {r.o(like)});
}
Proxy full_like(const Operand& like, const Operand& fill_value) { return binary("full_like", like, fill_value); }
Proxy randn_like(const Operand& like, uint64_t seed) {
  Rec r(like.site().loc(), {proxy_in(like)});
  NodeId x = r.o(like);
  return r.op("randn_like", {x, r.i(static_cast<int64_t>(seed))});
}

namespace {
Proxy variadic(const char* name, std::initializer_list<Operand> items, const CallSite& site) {
  const Proxy* first = nullptr;
  for (const Operand& o : items)
    if (!first) first = proxy_in(o);
  Rec r(site.loc(), {first});
  std::vector<NodeId> nodes;
  for (const Operand& o : items) nodes.push_back(r.o(o));
  return r.op(name, std::move(nodes));
}
}  // namespace

Proxy make_list(std::initializer_list<Operand> items, CallSite site) { return variadic("list", items, site); }
Proxy make_tuple(std::initializer_list<Operand> items, CallSite site) { return variadic("tuple", items, site); }

Proxy apply(const std::string& name, const std::vector<Operand>& args, CallSite site) {
  const Proxy* first = nullptr;
  for (const Operand& o : args)
    if (!first) first = proxy_in(o);
  Rec r(site.loc(), {first});
  std::vector<NodeId> nodes;
  for (const Operand& o : args) nodes.push_back(r.o(o));
  return ProxyAccess::make(r.b, r.b->apply(name, std::move(nodes), r.loc));
}
Proxy apply(const std::string& name, std::initializer_list<Operand> args, CallSite site) {
  return apply(name, std::vector<Operand>(args), site);
}

Proxy call_module(const std::string& path, const Operand& x, CallSite site) {
  Rec r(site.loc(), {proxy_in(x)});
  const NodeId arg = r.o(x);
  return ProxyAccess::make(r.b, r.b->call(path, arg, r.loc));
}

}  // namespace nnsight
