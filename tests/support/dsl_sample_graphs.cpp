#include "support/dsl_sample_graphs.h"

#include "dsl/builder.h"
#include "dsl/dtype.h"

#include <ATen/ATen.h>

#include <limits>

namespace nnsight::testing {

using dsl::NodeId;
using dsl::Value;

const dsl::FunctionRegistry& sample_functions() {
  static const dsl::FunctionRegistry r = [] {
    dsl::FunctionRegistry f;
    f.add("scale", 2, [](const std::vector<Value>& a) { return Value(a[0].as_tensor() * a[1].as_double()); });
    return f;
  }();
  return r;
}

dsl::Graph every_kind_graph() {
  auto b = std::make_shared<dsl::GraphBuilder>(7, 1);
  auto L = [](uint32_t line) { return SourceLoc{"tests/dsl/sample \"graph\".cpp", line}; };
  // Constants of every value kind.
  std::vector<Value> tensors;
  for (at::ScalarType t : {at::kBool, at::kByte, at::kChar, at::kShort, at::kInt, at::kLong, at::kHalf, at::kBFloat16,
                           at::kFloat, at::kDouble, at::kComplexFloat, at::kComplexDouble}) {
    at::Tensor x = at::arange(6, at::kDouble).reshape({2, 3}).sub(2).to(t);
    b->constant(Value(x), L(10));
  }
  b->constant(Value(at::zeros({0, 3})), L(11));                   // empty
  b->constant(Value(at::scalar_tensor(3.5)), L(12));              // 0-dim
  b->constant(Value(at::arange(12).reshape({3, 4}).t()), L(13));  // non-contiguous
  b->constant(Value(), L(14));
  b->constant(Value::integer(std::numeric_limits<int64_t>::min()), L(15));
  for (double d : {0.1, -0.0, 1e-300, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN(), 3.0})
    b->constant(Value::real(d), L(16));
  b->constant(Value::boolean(true), L(17));
  b->constant(Value::list({Value::integer(1), Value::list({Value::string("x"), Value()}), Value(at::ones({2}))}),
              L(18));
  b->constant(Value::tuple({at::ones({1, 2}), at::Tensor(), at::zeros({3}, at::kLong)}), L(19));
  b->constant(
      Value::index({dsl::IndexItem::make_int(-1), dsl::IndexItem::make_slice({}, -2, 3),
                    dsl::IndexItem::make_slice(1, {}, 1), dsl::IndexItem::make_ellipsis(), dsl::IndexItem::make_none(),
                    dsl::IndexItem::make_tensor(at::tensor({1, 0}).to(at::kBool))}),
      L(20));
  b->constant(Value::dtype(at::kBFloat16), L(21));
  b->constant(Value::string("h\u00e9llo \"w\u00f6rld\" \n\t\\ \xf0\x9f\x98\x80"), L(22));
  b->constant(Value::string(std::string("nul\0inside", 10)), SourceLoc{});  // unknown location

  // Get / op / set / save at a fixed step.
  NodeId h = b->get("model.layers.0.output", dsl::StepSpec::fixed(0), L(30));
  NodeId two = b->constant(Value::real(2.0), L(31));
  NodeId h2 = b->op("mul", {h, two}, L(31));
  b->set("model.layers.0.output", dsl::StepSpec::fixed(0), h2, L(32));
  b->save(h2, "doubled", dsl::SaveMode::Replace, L(33));
  // Cross-invoke reference and a registered function.
  NodeId ext = b->external(0, 3, L(34));
  NodeId scaled = b->apply("scale", {ext, two}, L(35));
  b->save(scaled, "scaled", dsl::SaveMode::Replace, L(36));
  // One of the model's modules run on a graph value.
  b->save(b->call("model.norm", h2, L(37)), "called", dsl::SaveMode::Replace, L(37));
  // A backward of a metric, then the gradient of a value read from the model.
  b->backward(b->op("sum", {h2}, L(38)), L(38));
  b->save(b->grad(h, L(39)), "h_grad", dsl::SaveMode::Replace, L(39));
  // A bounded iteration with a condition and an else.
  NodeId it = b->begin_iter(dsl::IterRange::range(1, 5, 2), L(40));
  NodeId lg = b->get("logits", dsl::StepSpec::iter(0), L(41));
  b->save(lg, "logits_each", dsl::SaveMode::Append, L(42));
  NodeId is3 = b->op("eq", {it, b->constant(Value::integer(3), L(43))}, L(43));
  b->begin_cond(is3, L(43));
  b->save(b->op("argmax", {lg}, L(44)), "argmax_at_3", dsl::SaveMode::Replace, L(44));
  b->begin_else(L(45));
  b->set("samples", dsl::StepSpec::iter(1),
         b->op("zeros_like", {b->get("samples", dsl::StepSpec::iter(1), L(46))}, L(46)), L(46));
  b->end_cond(L(47));
  b->end_iter(L(48));
  // An iteration over all steps that stops at step 7.
  NodeId all = b->begin_iter(dsl::IterRange::all_from(6), L(50));
  NodeId s = b->get("model.layers.1.mlp.output", dsl::StepSpec::iter(0), L(51));
  b->save(b->op("sum", {s}, L(52)), "mlp_sums", dsl::SaveMode::Append, L(52));
  b->begin_cond(b->op("ge", {all, b->constant(Value::integer(7), L(53))}, L(53)), L(53));
  b->stop(L(54));
  b->end_cond(L(55));
  b->end_iter(L(56));
  b->save(h, "never", dsl::SaveMode::Replace, L(57));  // after the stop: does not run
  return b->finish();
}

}  // namespace nnsight::testing
