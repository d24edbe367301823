#include "support/dsl_op_cases.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorIndexing.h>

namespace nnsight::testing {

using dsl::NodeId;
using dsl::Value;
using namespace at::indexing;

NodeId CaseBuilder::in(int k) {
  return b->get("in" + std::to_string(k) + ".output", dsl::StepSpec::fixed(0), SourceLoc{"cases.cpp", 1});
}
NodeId CaseBuilder::c(Value v) { return b->constant(std::move(v), SourceLoc{"cases.cpp", 2}); }
NodeId CaseBuilder::ints(std::vector<int64_t> v) {
  std::vector<Value> items;
  for (int64_t x : v) items.push_back(Value::integer(x));
  return c(Value::list(std::move(items)));
}
NodeId CaseBuilder::op(const std::string& name, std::vector<NodeId> args) {
  return b->op(name, std::move(args), SourceLoc{"cases.cpp", 3});
}

dsl::Graph build_case_graph(const OpCase& c) {
  CaseBuilder cb;
  NodeId out = c.build(cb);
  cb.b->save(out, "out", dsl::SaveMode::Replace, SourceLoc{"cases.cpp", 4});
  return cb.b->finish();
}

namespace {

using Inputs = std::vector<at::Tensor>;
using Gen = at::Generator;

at::Tensor randn(Gen& g, at::IntArrayRef shape) { return at::randn(shape, g, at::TensorOptions().dtype(at::kFloat)); }
at::Tensor positive(Gen& g, at::IntArrayRef shape) { return randn(g, shape).abs() + 0.5; }
at::Tensor randint(Gen& g, int64_t hi, at::IntArrayRef shape) {
  return at::randint(hi, shape, g, at::TensorOptions().dtype(at::kLong));
}

std::function<Inputs(Gen&)> one(std::vector<int64_t> shape) {
  return [shape](Gen& g) { return Inputs{randn(g, shape)}; };
}
std::function<Inputs(Gen&)> two(std::vector<int64_t> a, std::vector<int64_t> b) {
  return [a, b](Gen& g) { return Inputs{randn(g, a), randn(g, b)}; };
}
std::function<Inputs(Gen&)> none() {
  return [](Gen&) { return Inputs{}; };
}

Value tup(std::tuple<at::Tensor, at::Tensor> t) { return Value::tuple({std::get<0>(t), std::get<1>(t)}); }

// Binary op over (in0, in1), (in0, number) and (number, in0).
void add_binary(std::vector<OpCase>& cs, const std::string& name,
                std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> tt,
                std::function<at::Tensor(const at::Tensor&, const at::Scalar&)> ts,
                std::function<at::Tensor(const at::Scalar&, const at::Tensor&)> st, double number = 1.5) {
  cs.push_back({name, "tensor, tensor (broadcast)", two({2, 3}, {3}),
                [name](CaseBuilder& b) {
                  return b.op(name, {b.in(0), b.in(1)});
                },
                [tt](const Inputs& x) { return Value(tt(x[0], x[1])); }});
  cs.push_back({name, "tensor, double", one({2, 3}),
                [name, number](CaseBuilder& b) {
                  return b.op(name, {b.in(0), b.d(number)});
                },
                [ts, number](const Inputs& x) { return Value(ts(x[0], at::Scalar(number))); }});
  cs.push_back({name, "double, tensor", one({2, 3}),
                [name, number](CaseBuilder& b) {
                  return b.op(name, {b.d(number), b.in(0)});
                },
                [st, number](const Inputs& x) { return Value(st(at::Scalar(number), x[0])); }});
  cs.push_back({name, "int tensor, int", [](Gen& g) { return Inputs{randint(g, 5, {4}) + 1}; },
                [name](CaseBuilder& b) {
                  return b.op(name, {b.in(0), b.i(2)});
                },
                [ts](const Inputs& x) { return Value(ts(x[0], at::Scalar(int64_t{2}))); }});
}

std::vector<OpCase> make_cases() {
  std::vector<OpCase> cs;

  // ---- arith ----
  add_binary(
      cs, "add", [](auto& a, auto& b) { return at::add(a, b); }, [](auto& a, auto& s) { return at::add(a, s); },
      [](auto& s, auto& a) { return s + a; });
  add_binary(
      cs, "sub", [](auto& a, auto& b) { return at::sub(a, b); }, [](auto& a, auto& s) { return at::sub(a, s); },
      [](auto& s, auto& a) { return s - a; });
  add_binary(
      cs, "mul", [](auto& a, auto& b) { return at::mul(a, b); }, [](auto& a, auto& s) { return at::mul(a, s); },
      [](auto& s, auto& a) { return s * a; });
  add_binary(
      cs, "div", [](auto& a, auto& b) { return at::div(a, b); }, [](auto& a, auto& s) { return at::div(a, s); },
      [](auto& s, auto& a) { return s / a; });
  add_binary(
      cs, "pow", [](auto& a, auto& b) { return at::pow(a.abs(), b); }, [](auto& a, auto& s) { return at::pow(a, s); },
      [](auto& s, auto& a) { return at::pow(s, a); }, 2.0);
  // pow of a tensor and a tensor: make the base positive for real results.
  cs[cs.size() - 4].build = [](CaseBuilder& b) { return b.op("pow", {b.op("abs", {b.in(0)}), b.in(1)}); };
  for (const char* cmp : {"lt", "le", "gt", "ge", "eq", "ne"}) {
    std::string n = cmp;
    auto tt = [n](const at::Tensor& a, const at::Tensor& b) {
      return n == "lt"   ? at::lt(a, b)
             : n == "le" ? at::le(a, b)
             : n == "gt" ? at::gt(a, b)
             : n == "ge" ? at::ge(a, b)
             : n == "eq" ? at::eq(a, b)
                         : at::ne(a, b);
    };
    auto ts = [n](const at::Tensor& a, const at::Scalar& s) {
      return n == "lt"   ? at::lt(a, s)
             : n == "le" ? at::le(a, s)
             : n == "gt" ? at::gt(a, s)
             : n == "ge" ? at::ge(a, s)
             : n == "eq" ? at::eq(a, s)
                         : at::ne(a, s);
    };
    // number OP tensor is the mirrored comparison of tensor and number.
    auto st = [n](const at::Scalar& s, const at::Tensor& a) {
      at::Tensor full = at::full_like(a, s);
      return n == "lt"   ? at::lt(full, a)
             : n == "le" ? at::le(full, a)
             : n == "gt" ? at::gt(full, a)
             : n == "ge" ? at::ge(full, a)
             : n == "eq" ? at::eq(full, a)
                         : at::ne(full, a);
    };
    add_binary(cs, n, tt, ts, st, 0.25);
  }
  // Numbers with Python's rules (hand-computed).
  cs.push_back({"add", "int, int", none(),
                [](CaseBuilder& b) {
                  return b.op("add", {b.i(2), b.i(3)});
                },
                [](const Inputs&) { return Value::integer(5); }});
  cs.push_back({"sub", "int, double", none(),
                [](CaseBuilder& b) {
                  return b.op("sub", {b.i(2), b.d(0.5)});
                },
                [](const Inputs&) { return Value::real(1.5); }});
  cs.push_back({"mul", "bool, int", none(),
                [](CaseBuilder& b) {
                  return b.op("mul", {b.t(true), b.i(7)});
                },
                [](const Inputs&) { return Value::integer(7); }});
  cs.push_back({"div", "int, int (true division)", none(),
                [](CaseBuilder& b) {
                  return b.op("div", {b.i(7), b.i(2)});
                },
                [](const Inputs&) { return Value::real(3.5); }});
  cs.push_back({"pow", "int, int", none(),
                [](CaseBuilder& b) {
                  return b.op("pow", {b.i(3), b.i(4)});
                },
                [](const Inputs&) { return Value::integer(81); }});
  cs.push_back({"lt", "int, double", none(),
                [](CaseBuilder& b) {
                  return b.op("lt", {b.i(2), b.d(2.5)});
                },
                [](const Inputs&) { return Value::boolean(true); }});
  cs.push_back({"eq", "int, int", none(),
                [](CaseBuilder& b) {
                  return b.op("eq", {b.i(2), b.i(3)});
                },
                [](const Inputs&) { return Value::boolean(false); }});
  cs.push_back({"neg", "tensor", one({2, 3}), [](CaseBuilder& b) { return b.op("neg", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::neg(x[0])); }});
  cs.push_back({"neg", "int", none(), [](CaseBuilder& b) { return b.op("neg", {b.i(4)}); },
                [](const Inputs&) { return Value::integer(-4); }});

  // ---- index ----
  auto idx = [](std::vector<dsl::IndexItem> items) { return Value::index(std::move(items)); };
  using II = dsl::IndexItem;
  cs.push_back({"getitem", "[:, -1]", one({3, 4}),
                [idx](CaseBuilder& b) {
                  return b.op("getitem", {b.in(0), b.c(idx({II::make_slice({}, {}), II::make_int(-1)}))});
                },
                [](const Inputs& x) {
                  return Value(x[0].index({Slice(), -1}));
                }});
  cs.push_back({"getitem", "[-3:-1:1, 1:]", one({5, 4}),
                [idx](CaseBuilder& b) {
                  return b.op("getitem", {b.in(0), b.c(idx({II::make_slice(-3, -1, 1), II::make_slice(1, {})}))});
                },
                [](const Inputs& x) {
                  return Value(x[0].index({Slice(-3, -1, 1), Slice(1, None)}));
                }});
  cs.push_back(
      {"getitem", "[..., None, ::2]", one({2, 3, 6}),
       [idx](CaseBuilder& b) {
         return b.op("getitem", {b.in(0), b.c(idx({II::make_ellipsis(), II::make_none(), II::make_slice({}, {}, 2)}))});
       },
       [](const Inputs& x) {
         return Value(x[0].index({Ellipsis, None, Slice(None, None, 2)}));
       }});
  cs.push_back({"getitem", "int", one({3, 4}),
                [](CaseBuilder& b) {
                  return b.op("getitem", {b.in(0), b.i(1)});
                },
                [](const Inputs& x) { return Value(x[0].index({1})); }});
  cs.push_back({"getitem", "boolean mask from a comparison", one({3, 4}),
                [](CaseBuilder& b) {
                  NodeId x = b.in(0);
                  return b.op("getitem", {x, b.op("gt", {x, b.d(0.0)})});
                },
                [](const Inputs& x) { return Value(x[0].index({x[0] > 0})); }});
  cs.push_back({"getitem", "integer index tensor in a spec", one({3, 4}),
                [idx](CaseBuilder& b) {
                  at::Tensor ids = at::tensor({2, 0}, at::kLong);
                  return b.op("getitem", {b.in(0), b.c(idx({II::make_slice({}, {}), II::make_tensor(ids)}))});
                },
                [](const Inputs& x) {
                  return Value(x[0].index({Slice(), at::tensor({2, 0}, at::kLong)}));
                }});
  cs.push_back({"getitem", "mixed list (slice spec, proxy tensor)", one({3, 4}),
                [idx](CaseBuilder& b) {
                  NodeId x = b.in(0);
                  NodeId am = b.op("argmax", {x, b.i(1)});
                  NodeId parts = b.op("list", {b.c(idx({II::make_slice({}, {})})), am});
                  return b.op("getitem", {x, parts});
                },
                [](const Inputs& x) {
                  return Value(x[0].index({Slice(), x[0].argmax(1)}));
                }});
  cs.push_back({"getitem", "tuple element (tuple element access)", one({2, 3}),
                [](CaseBuilder& b) {
                  NodeId x = b.in(0);
                  NodeId t = b.op("topk", {x, b.i(2)});
                  return b.op("getitem", {t, b.i(-1)});
                },
                [](const Inputs& x) { return Value(std::get<1>(x[0].topk(2))); }});
  cs.push_back({"getitem", "list element", one({2}),
                [](CaseBuilder& b) {
                  NodeId l = b.op("list", {b.i(7), b.in(0)});
                  return b.op("getitem", {l, b.i(0)});
                },
                [](const Inputs&) { return Value::integer(7); }});
  cs.push_back({"setitem", "x[:, 0] = 5 (in place, returns x)", one({3, 4}),
                [idx](CaseBuilder& b) {
                  return b.op("setitem", {b.in(0), b.c(idx({II::make_slice({}, {}), II::make_int(0)})), b.i(5)});
                },
                [](const Inputs& x) {
                  at::Tensor r = x[0].clone();
                  r.index_put_({Slice(), 0}, 5);
                  return Value(r);
                }});
  cs.push_back({"setitem", "x[mask] = tensor", two({3, 4}, {3, 4}),
                [](CaseBuilder& b) {
                  NodeId x = b.in(0);
                  NodeId y = b.in(1);
                  NodeId mask = b.op("lt", {x, b.d(0.0)});
                  NodeId vals = b.op("getitem", {y, mask});
                  return b.op("setitem", {x, mask, vals});
                },
                [](const Inputs& x) {
                  at::Tensor r = x[0].clone();
                  at::Tensor mask = x[0] < 0;
                  r.index_put_({mask}, x[1].index({mask}));
                  return Value(r);
                }});

  // ---- convert ----
  cs.push_back({"clone", "", one({2, 3}), [](CaseBuilder& b) { return b.op("clone", {b.in(0)}); },
                [](const Inputs& x) { return Value(x[0].clone()); }});
  cs.push_back({"detach", "", one({2, 3}), [](CaseBuilder& b) { return b.op("detach", {b.in(0)}); },
                [](const Inputs& x) { return Value(x[0].detach()); }});
  cs.push_back({"to", "float64", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("to", {b.in(0), b.c(Value::dtype(at::kDouble))});
                },
                [](const Inputs& x) { return Value(x[0].to(at::kDouble)); }});
  cs.push_back({"to", "bfloat16", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("to", {b.in(0), b.c(Value::dtype(at::kBFloat16))});
                },
                [](const Inputs& x) { return Value(x[0].to(at::kBFloat16)); }});
  cs.push_back({"contiguous", "of a transpose", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("contiguous", {b.op("transpose", {b.in(0), b.i(0), b.i(1)})});
                },
                [](const Inputs& x) { return Value(x[0].t().contiguous()); }});
  cs.push_back({"item", "float -> double", one({1}), [](CaseBuilder& b) { return b.op("item", {b.in(0)}); },
                [](const Inputs& x) { return Value::real(x[0].item<float>()); }});
  cs.push_back({"item", "int -> int",
                [](Gen& g) {
                  return Inputs{randint(g, 100, {1, 1})};
                },
                [](CaseBuilder& b) { return b.op("item", {b.in(0)}); },
                [](const Inputs& x) { return Value::integer(x[0].item<int64_t>()); }});
  cs.push_back({"item", "bool -> bool", one({1}),
                [](CaseBuilder& b) {
                  return b.op("item", {b.op("gt", {b.in(0), b.d(0.0)})});
                },
                [](const Inputs& x) { return Value::boolean(x[0].item<float>() > 0); }});

  // ---- shape ----
  cs.push_back({"reshape", "", one({2, 6}),
                [](CaseBuilder& b) {
                  return b.op("reshape", {b.in(0), b.ints({3, -1})});
                },
                [](const Inputs& x) {
                  return Value(x[0].reshape({3, -1}));
                }});
  cs.push_back({"view", "", one({2, 6}),
                [](CaseBuilder& b) {
                  return b.op("view", {b.in(0), b.ints({4, 3})});
                },
                [](const Inputs& x) {
                  return Value(x[0].view({4, 3}));
                }});
  cs.push_back({"transpose", "", one({2, 3, 4}),
                [](CaseBuilder& b) {
                  return b.op("transpose", {b.in(0), b.i(0), b.i(-1)});
                },
                [](const Inputs& x) { return Value(x[0].transpose(0, -1)); }});
  cs.push_back({"permute", "", one({2, 3, 4}),
                [](CaseBuilder& b) {
                  return b.op("permute", {b.in(0), b.ints({2, 0, 1})});
                },
                [](const Inputs& x) {
                  return Value(x[0].permute({2, 0, 1}));
                }});
  cs.push_back({"unsqueeze", "", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("unsqueeze", {b.in(0), b.i(1)});
                },
                [](const Inputs& x) { return Value(x[0].unsqueeze(1)); }});
  cs.push_back({"squeeze", "all", one({1, 3, 1}), [](CaseBuilder& b) { return b.op("squeeze", {b.in(0)}); },
                [](const Inputs& x) { return Value(x[0].squeeze()); }});
  cs.push_back({"squeeze", "dim", one({1, 3, 1}),
                [](CaseBuilder& b) {
                  return b.op("squeeze", {b.in(0), b.i(-1)});
                },
                [](const Inputs& x) { return Value(x[0].squeeze(-1)); }});
  cs.push_back({"flatten", "", one({2, 3, 4}),
                [](CaseBuilder& b) {
                  return b.op("flatten", {b.in(0), b.i(1)});
                },
                [](const Inputs& x) { return Value(x[0].flatten(1)); }});
  cs.push_back({"size", "", one({2, 3, 4}),
                [](CaseBuilder& b) {
                  return b.op("size", {b.in(0), b.i(-1)});
                },
                [](const Inputs& x) { return Value::integer(x[0].size(-1)); }});
  cs.push_back({"cat", "", two({2, 3}, {1, 3}),
                [](CaseBuilder& b) {
                  return b.op("cat", {b.op("list", {b.in(0), b.in(1)}), b.i(0)});
                },
                [](const Inputs& x) {
                  return Value(at::cat({x[0], x[1]}, 0));
                }});
  cs.push_back({"stack", "", two({2, 3}, {2, 3}),
                [](CaseBuilder& b) {
                  return b.op("stack", {b.op("list", {b.in(0), b.in(1)}), b.i(1)});
                },
                [](const Inputs& x) {
                  return Value(at::stack({x[0], x[1]}, 1));
                }});

  // ---- reduce ----
  cs.push_back({"sum", "all", one({2, 3}), [](CaseBuilder& b) { return b.op("sum", {b.in(0)}); },
                [](const Inputs& x) { return Value(x[0].sum()); }});
  cs.push_back({"sum", "dims keepdim", one({2, 3, 4}),
                [](CaseBuilder& b) {
                  return b.op("sum", {b.in(0), b.ints({0, 2}), b.t(true)});
                },
                [](const Inputs& x) {
                  return Value(x[0].sum(at::IntArrayRef{0, 2}, true));
                }});
  cs.push_back({"mean", "all", one({2, 3}), [](CaseBuilder& b) { return b.op("mean", {b.in(0)}); },
                [](const Inputs& x) { return Value(x[0].mean()); }});
  cs.push_back({"mean", "dim", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("mean", {b.in(0), b.i(-1)});
                },
                [](const Inputs& x) { return Value(x[0].mean(-1)); }});
  cs.push_back({"max", "all", one({2, 3}), [](CaseBuilder& b) { return b.op("max", {b.in(0)}); },
                [](const Inputs& x) { return Value(x[0].max()); }});
  cs.push_back({"max", "dim -> (values, indices)", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("max", {b.in(0), b.i(1), b.t(true)});
                },
                [](const Inputs& x) { return tup(x[0].max(1, true)); }});
  cs.push_back({"min", "all", one({2, 3}), [](CaseBuilder& b) { return b.op("min", {b.in(0)}); },
                [](const Inputs& x) { return Value(x[0].min()); }});
  cs.push_back({"min", "dim -> (values, indices)", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("min", {b.in(0), b.i(0)});
                },
                [](const Inputs& x) { return tup(x[0].min(0)); }});
  cs.push_back({"argmax", "flattened", one({2, 3}), [](CaseBuilder& b) { return b.op("argmax", {b.in(0)}); },
                [](const Inputs& x) { return Value(x[0].argmax()); }});
  cs.push_back({"argmax", "dim keepdim", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("argmax", {b.in(0), b.i(-1), b.t(true)});
                },
                [](const Inputs& x) { return Value(x[0].argmax(-1, true)); }});
  cs.push_back({"topk", "", one({3, 5}),
                [](CaseBuilder& b) {
                  return b.op("topk", {b.in(0), b.i(2)});
                },
                [](const Inputs& x) { return tup(x[0].topk(2)); }});
  cs.push_back({"topk", "smallest on dim 0", one({3, 5}),
                [](CaseBuilder& b) {
                  return b.op("topk", {b.in(0), b.i(2), b.i(0), b.t(false), b.t(true)});
                },
                [](const Inputs& x) { return tup(x[0].topk(2, 0, false, true)); }});
  cs.push_back({"norm", "2-norm of all", one({2, 3}), [](CaseBuilder& b) { return b.op("norm", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::norm(x[0], 2)); }});
  cs.push_back({"norm", "1-norm over dim", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("norm", {b.in(0), b.i(1), b.ints({-1}), b.t(false)});
                },
                [](const Inputs& x) {
                  return Value(at::norm(x[0], c10::optional<at::Scalar>(at::Scalar(int64_t{1})), {-1}, false));
                }});

  // ---- activation ----
  cs.push_back({"abs", "", one({2, 3}), [](CaseBuilder& b) { return b.op("abs", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::abs(x[0])); }});
  cs.push_back({"exp", "", one({2, 3}), [](CaseBuilder& b) { return b.op("exp", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::exp(x[0])); }});
  cs.push_back({"log", "",
                [](Gen& g) {
                  return Inputs{positive(g, {2, 3})};
                },
                [](CaseBuilder& b) { return b.op("log", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::log(x[0])); }});
  cs.push_back({"sqrt", "",
                [](Gen& g) {
                  return Inputs{positive(g, {2, 3})};
                },
                [](CaseBuilder& b) { return b.op("sqrt", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::sqrt(x[0])); }});
  cs.push_back({"tanh", "", one({2, 3}), [](CaseBuilder& b) { return b.op("tanh", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::tanh(x[0])); }});
  cs.push_back({"sigmoid", "", one({2, 3}), [](CaseBuilder& b) { return b.op("sigmoid", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::sigmoid(x[0])); }});
  cs.push_back({"relu", "", one({2, 3}), [](CaseBuilder& b) { return b.op("relu", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::relu(x[0])); }});
  cs.push_back({"gelu", "exact", one({2, 3}), [](CaseBuilder& b) { return b.op("gelu", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::gelu(x[0])); }});
  cs.push_back({"gelu", "tanh", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("gelu", {b.in(0), b.c(Value::string("tanh"))});
                },
                [](const Inputs& x) { return Value(at::gelu(x[0], "tanh")); }});
  cs.push_back({"softmax", "", one({2, 5}),
                [](CaseBuilder& b) {
                  return b.op("softmax", {b.in(0), b.i(-1)});
                },
                [](const Inputs& x) { return Value(at::softmax(x[0], -1)); }});
  cs.push_back({"log_softmax", "", one({2, 5}),
                [](CaseBuilder& b) {
                  return b.op("log_softmax", {b.in(0), b.i(0)});
                },
                [](const Inputs& x) { return Value(at::log_softmax(x[0], 0)); }});

  // ---- linalg ----
  cs.push_back({"matmul", "", two({2, 3}, {3, 4}),
                [](CaseBuilder& b) {
                  return b.op("matmul", {b.in(0), b.in(1)});
                },
                [](const Inputs& x) { return Value(at::matmul(x[0], x[1])); }});
  cs.push_back({"outer", "", two({3}, {4}),
                [](CaseBuilder& b) {
                  return b.op("outer", {b.in(0), b.in(1)});
                },
                [](const Inputs& x) { return Value(at::outer(x[0], x[1])); }});

  // ---- factory ----
  cs.push_back({"zeros_like", "", one({2, 3}), [](CaseBuilder& b) { return b.op("zeros_like", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::zeros_like(x[0])); }});
  cs.push_back({"ones_like", "", one({2, 3}), [](CaseBuilder& b) { return b.op("ones_like", {b.in(0)}); },
                [](const Inputs& x) { return Value(at::ones_like(x[0])); }});
  cs.push_back({"full_like", "", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("full_like", {b.in(0), b.d(-2.5)});
                },
                [](const Inputs& x) { return Value(at::full_like(x[0], -2.5)); }});
  cs.push_back({"randn_like", "seeded", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("randn_like", {b.in(0), b.i(1234)});
                },
                [](const Inputs& x) {
                  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
                  return Value(at::randn(x[0].sizes(), gen, x[0].options()));
                }});
  cs.push_back({"where", "tensors",
                [](Gen& g) {
                  return Inputs{randn(g, {2, 3}), randn(g, {2, 3}), randn(g, {3})};
                },
                [](CaseBuilder& b) {
                  return b.op("where", {b.op("gt", {b.in(0), b.d(0.0)}), b.in(1), b.in(2)});
                },
                [](const Inputs& x) { return Value(at::where(x[0] > 0, x[1], x[2])); }});
  cs.push_back(
      {"where", "tensor and number", two({2, 3}, {2, 3}),
       [](CaseBuilder& b) {
         return b.op("where", {b.op("gt", {b.in(0), b.d(0.0)}), b.in(1), b.d(0.5)});
       },
       [](const Inputs& x) { return Value(at::where(x[0] > 0, x[1], at::scalar_tensor(0.5, x[1].options()))); }});
  cs.push_back({"where", "numbers", one({2, 3}),
                [](CaseBuilder& b) {
                  return b.op("where", {b.op("gt", {b.in(0), b.d(0.0)}), b.i(1), b.i(-1)});
                },
                [](const Inputs& x) {
                  return Value(at::where(x[0] > 0, at::scalar_tensor(1, at::kLong), at::scalar_tensor(-1, at::kLong)));
                }});

  // ---- container ----
  cs.push_back({"list", "", one({2}),
                [](CaseBuilder& b) {
                  return b.op("list", {b.in(0), b.i(3), b.c(Value::string("s"))});
                },
                [](const Inputs& x) {
                  return Value::list({Value(x[0]), Value::integer(3), Value::string("s")});
                }});
  cs.push_back({"tuple", "with a none", two({2}, {3}),
                [](CaseBuilder& b) {
                  return b.op("tuple", {b.in(0), b.c(Value()), b.in(1)});
                },
                [](const Inputs& x) {
                  return Value::tuple({x[0], at::Tensor(), x[1]});
                }});
  return cs;
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = make_cases();
  return cases;
}

}  // namespace nnsight::testing
