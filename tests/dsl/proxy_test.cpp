// The public proxy API: what it records, the source lines it records, and
// its errors. Graphs recorded through proxies are evaluated against a fake
// provider and compared with the same computation done directly.
#include <nnsight/proxy.hpp>

#include "dsl/builder.h"
#include "dsl/errors.h"
#include "support/dsl_testing.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace nnsight::testing {
namespace {

using dsl::GraphBuilder;
using dsl::NodeKind;
using dsl::StepSpec;
using dsl::Value;

// What the tracing layer does for envoy.output(): a Get recorded as a proxy.
Proxy output_of(const std::shared_ptr<GraphBuilder>& b, const std::string& module, int64_t step = 0) {
  return Proxy(b, b->get(module + ".output", StepSpec::fixed(step), SourceLoc{"envoy", 0}));
}

const dsl::Node& node_of(const Proxy& p) { return p.builder()->graph().nodes.at(p.node()); }

TEST(DslProxy, NodesRecordTheLineThatCreatedThem) {
  auto b = std::make_shared<GraphBuilder>();
  Proxy h = output_of(b, "model.layers.0");
  const unsigned base = __LINE__;
  Proxy sum = h + 1;             // base + 1
  Proxy prod = 2.0 * h;          // base + 2
  Proxy sm = h.softmax(-1);      // base + 3
  Proxy idx = h[{Slice(), -1}];  // base + 4
  Proxy m = where(h > 0, h, 0);  // base + 5
  Saved s = sm.save();           // base + 6
  EXPECT_EQ(node_of(sum).loc.line, base + 1);
  EXPECT_EQ(node_of(prod).loc.line, base + 2);
  EXPECT_EQ(node_of(sm).loc.line, base + 3);
  EXPECT_EQ(node_of(idx).loc.line, base + 4);
  EXPECT_EQ(node_of(m).loc.line, base + 5);
  EXPECT_EQ(b->graph().nodes.back().loc.line, base + 6);
  EXPECT_EQ(b->graph().nodes.back().kind, NodeKind::Save);
  EXPECT_EQ(node_of(sum).loc.file, std::string(__FILE__));
  EXPECT_TRUE(s.valid());
}

TEST(DslProxy, ExpressionsEvaluateLikeLibTorch) {
  auto b = std::make_shared<GraphBuilder>();
  Proxy h = output_of(b, "model.layers.0");
  at::Tensor v = at::linspace(-1, 1, 4);
  Proxy y = ((h * 2 - v) / 3 + 1).relu();
  Proxy z = cat({y, -h}, 0).softmax(1).log_softmax(0);
  Proxy t = h.transpose(0, 1).reshape({8}).unsqueeze(0).sum(-1, true);
  Proxy cmp = (h >= 0).to(at::kFloat).mean() + h.abs().max() - h.min() + h.norm(2.0, {1}).sum();
  Proxy top = h.topk(2)[1];
  Proxy ext = h.exp().log().sqrt().tanh().sigmoid().gelu("tanh").clone().detach().contiguous();
  Proxy mm = matmul(h, h.transpose(0, 1)) + outer(h[0], h[1]).sum();
  Proxy st = stack(std::vector<Proxy>{h, zeros_like(h), ones_like(h), full_like(h, 3)}, 0).flatten(1).size(1);
  Proxy it = h[{0, 1}].item() * 10;
  Proxy am = h.argmax(1);
  Proxy pw = h.pow(2).eq(h * h);
  Saved sy = y.save(), sz = z.save(), sst = t.save(), scmp = cmp.save(), stop = top.save(), sext = ext.save(),
        smm = mm.save(), sstk = st.save(), sit = it.save(), sam = am.save(), spw = pw.save("pow");
  EXPECT_EQ(spw.name(), "pow");
  FakeProvider p;
  run_graph(b->finish(), p);
  at::Tensor x = FakeProvider::default_tensor("model.layers.0.output", 0);
  auto got = [&](const Saved& s) { return p.saves.at(s.name()); };
  EXPECT_TRUE(same_value(got(sy), Value(((x * 2 - v) / 3 + 1).relu())));
  EXPECT_TRUE(same_value(got(sz), Value(at::cat({((x * 2 - v) / 3 + 1).relu(), -x}, 0).softmax(1).log_softmax(0))));
  EXPECT_TRUE(same_value(got(sst), Value(x.transpose(0, 1).reshape({8}).unsqueeze(0).sum(-1, true))));
  EXPECT_TRUE(same_value(
      got(scmp), Value((x >= 0).to(at::kFloat).mean() + x.abs().max() - x.min() + at::norm(x, 2.0, {1}, false).sum())));
  EXPECT_TRUE(same_value(got(stop), Value(std::get<1>(x.topk(2)))));
  EXPECT_TRUE(same_value(got(sext), Value(at::gelu(x.exp().log().sqrt().tanh().sigmoid(), "tanh"))));
  EXPECT_TRUE(same_value(got(smm), Value(at::matmul(x, x.t()) + at::outer(x[0], x[1]).sum())));
  EXPECT_TRUE(same_value(got(sstk), Value::integer(8)));
  EXPECT_TRUE(same_value(got(sit), Value::real(static_cast<double>(x.index({0, 1}).item<float>()) * 10)));
  EXPECT_TRUE(same_value(got(sam), Value(x.argmax(1))));
  EXPECT_TRUE(same_value(got(spw), Value(x.pow(2).eq(x * x))));
}

TEST(DslProxy, AssigningToAnOutputRecordsASet) {
  auto b = std::make_shared<GraphBuilder>();
  const unsigned line = __LINE__ + 1;
  output_of(b, "model.layers.28.mlp") = output_of(b, "model.layers.28.mlp") * 0;
  const dsl::Graph& g = b->graph();
  // get, const 0, mul (the right side, evaluated first), get (the target), set.
  ASSERT_EQ(g.nodes.size(), 5u);
  EXPECT_EQ(g.nodes[4].kind, NodeKind::Set);
  EXPECT_EQ(g.nodes[4].name, "model.layers.28.mlp.output");
  EXPECT_EQ(g.nodes[4].args, std::vector<dsl::NodeId>{2});
  EXPECT_EQ(g.nodes[4].loc.line, line);
  // A tensor on the right becomes a constant.
  output_of(b, "model.layers.1", 3) = at::ones({2, 4});
  EXPECT_EQ(g.nodes.back().kind, NodeKind::Set);
  EXPECT_EQ(g.nodes.back().step, StepSpec::fixed(3));
  EXPECT_EQ(g.nodes[g.nodes.size() - 2].kind, NodeKind::Const);
  // Assigning to a computed value is an error; rebinding a named proxy is not.
  Proxy h = output_of(b, "model.layers.2");
  EXPECT_THROW(std::move(h)* 2 = 1, dsl::BuildError);
  h = h * 2;
  EXPECT_EQ(node_of(h).name, "mul");
}

TEST(DslProxy, IndexedAssignmentIsInPlace) {
  auto b = std::make_shared<GraphBuilder>();
  Proxy h = output_of(b, "model.layers.0");
  size_t before = b->size();
  h[{Slice(), 0}] = 5;
  // const index, getitem (the read x[:, 0], unused), const 5, setitem.
  ASSERT_EQ(b->size(), before + 4);
  const dsl::Node& set = b->graph().nodes.back();
  EXPECT_EQ(set.name, "setitem");
  EXPECT_EQ(set.args[0], h.node());
  h.index_put({Ellipsis, Slice(-1, {})}, h[{Slice(), 1}].unsqueeze(1) * 10);
  Proxy mask = h < 0;
  h[mask] = 0;
  FakeProvider p;
  at::Tensor x = FakeProvider::default_tensor("model.layers.0.output", 0);
  p.put("model.layers.0.output", 0, Value(x));
  at::Tensor want = x.clone();
  want.index_put_({at::indexing::Slice(), 0}, 5);
  want.index_put_({at::indexing::Ellipsis, at::indexing::Slice(-1, at::indexing::None)},
                  want.index({at::indexing::Slice(), 1}).unsqueeze(1) * 10);
  want.index_put_({want < 0}, 0);
  run_graph(b->finish(), p);
  EXPECT_TRUE(at::equal(x, want));  // the provider's tensor itself
}

TEST(DslProxy, IndexSpecsMixStaticItemsAndProxies) {
  auto b = std::make_shared<GraphBuilder>();
  Proxy h = output_of(b, "model.layers.0");
  Proxy am = h.argmax(1);
  Proxy picked = h[{Slice(), am}];
  Proxy row = h[0];
  Proxy na = h[{None, Ellipsis, Slice({}, {}, 2)}];
  Proxy byt = h[at::tensor({1, 0}).to(at::kBool)];
  Saved s1 = picked.save(), s2 = row.save(), s3 = na.save(), s4 = byt.save();
  FakeProvider p;
  run_graph(b->finish(), p);
  at::Tensor x = FakeProvider::default_tensor("model.layers.0.output", 0);
  namespace ai = at::indexing;
  EXPECT_TRUE(same_value(p.saves.at(s1.name()), Value(x.index({ai::Slice(), x.argmax(1)}))));
  EXPECT_TRUE(same_value(p.saves.at(s2.name()), Value(x[0])));
  EXPECT_TRUE(
      same_value(p.saves.at(s3.name()), Value(x.index({ai::None, ai::Ellipsis, ai::Slice(ai::None, ai::None, 2)}))));
  EXPECT_TRUE(same_value(p.saves.at(s4.name()), Value(x.index({at::tensor({1, 0}).to(at::kBool)}))));
}

TEST(DslProxy, CrossInvokeUseRecordsAnExternal) {
  auto b0 = std::make_shared<GraphBuilder>(5, 0);
  auto b1 = std::make_shared<GraphBuilder>(5, 1);
  Proxy h0 = output_of(b0, "model.layers.3");
  Proxy mean0 = h0.mean(0);
  Proxy h1 = output_of(b1, "model.layers.3");
  {
    GraphBuilder::Scope recording(b1.get());  // now tracing invoke 1
    Proxy mixed = h1 + mean0;
    EXPECT_EQ(mixed.builder(), b1);
    const auto& g1 = b1->graph();
    ASSERT_EQ(g1.nodes.size(), 3u);
    EXPECT_EQ(g1.nodes[1].kind, NodeKind::External);
    EXPECT_EQ(g1.nodes[1].ext_invoke, 0u);
    EXPECT_EQ(g1.nodes[1].ext_node, mean0.node());
  }
  // Using a later invoke's value, or another trace's, is an error.
  {
    GraphBuilder::Scope recording(b0.get());
    EXPECT_THROW(h0 + h1, dsl::BuildError);
  }
  auto other = std::make_shared<GraphBuilder>(6, 1);
  GraphBuilder::Scope recording(other.get());
  std::string msg = error_of<dsl::BuildError>([&] { h0 * 2; });
  EXPECT_NE(msg.find("another trace"), std::string::npos);
  EXPECT_NE(msg.find(__FILE__), std::string::npos) << msg;
  EXPECT_THROW(h0 * 2, TraceError);  // what the docs tell users to catch
}

TEST(DslProxy, BuildErrorsNameTheUsersLine) {
  auto b = std::make_shared<GraphBuilder>();
  Proxy h = output_of(b, "model.layers.0");
  Proxy tup = h.max(0);
  const unsigned line = __LINE__ + 1;
  std::string msg = error_of<dsl::BuildError>([&] { tup.softmax(0); });
  EXPECT_NE(msg.find(std::string(__FILE__) + ":" + std::to_string(line)), std::string::npos) << msg;
  EXPECT_NE(msg.find("must be tensor, but node"), std::string::npos) << msg;
  EXPECT_THROW(Proxy() + 1, dsl::BuildError);                         // empty proxy
  EXPECT_THROW(nnsight::zeros_like(at::ones({2})), dsl::BuildError);  // no trace, no proxy
  EXPECT_THROW(h[{Slice(0, 2, 0)}], dsl::BuildError);                 // slice step 0
  const unsigned first = __LINE__ + 1;
  Saved a = h.save("x");
  // A repeated save name names both lines, and is a TraceError as the docs say.
  const unsigned second = __LINE__ + 1;
  const std::string dup = error_of<TraceError>([&] { h.save("x"); });
  EXPECT_NE(dup.find(std::string(__FILE__) + ":" + std::to_string(first)), std::string::npos) << dup;
  EXPECT_NE(dup.find(std::string(__FILE__) + ":" + std::to_string(second)), std::string::npos) << dup;
  Saved e1 = h.save_each(), e2 = h.save_each();
  EXPECT_NE(e1.name(), e2.name());
  EXPECT_EQ(b->graph().nodes.back().save_mode, dsl::SaveMode::Append);
}

TEST(DslProxy, BuilderBlocksMustBalance) {
  auto b = std::make_shared<GraphBuilder>();
  EXPECT_THROW(b->end_iter(SourceLoc{"u.cpp", 1}), dsl::BuildError);
  dsl::NodeId c = b->constant(Value::boolean(true), SourceLoc{"u.cpp", 2});
  b->begin_cond(c, SourceLoc{"u.cpp", 3});
  EXPECT_THROW(b->end_iter(SourceLoc{"u.cpp", 4}), dsl::BuildError);
  EXPECT_THROW(b->get("logits", StepSpec::iter(0), SourceLoc{"u.cpp", 5}), dsl::BuildError);
  std::string msg = error_of<dsl::BuildError>([&] { b->finish(); });
  EXPECT_EQ(msg, "u.cpp:3: this condition block was never closed");
  b->end_cond(SourceLoc{"u.cpp", 6});
  b->finish();
  EXPECT_THROW(b->constant(Value(), SourceLoc{"u.cpp", 7}), dsl::BuildError);  // finished
}

TEST(DslProxy, ApplyAndContainers) {
  auto b = std::make_shared<GraphBuilder>();
  Proxy h = output_of(b, "model.layers.0");
  Proxy r = apply("scale", {h, 3});
  Proxy tp = make_tuple({h, r});
  Proxy ls = make_list({h.size(0), 2.5, true});
  Saved s1 = tp.save(), s2 = ls.save();
  dsl::FunctionRegistry fr;
  fr.add("scale", 2, [](const std::vector<Value>& a) { return Value(a[0].as_tensor() * a[1].as_int()); });
  FakeProvider p;
  run_graph(b->finish(), p, &fr);
  at::Tensor x = FakeProvider::default_tensor("model.layers.0.output", 0);
  EXPECT_TRUE(same_value(p.saves.at(s1.name()), Value::tuple({x, x * 3})));
  EXPECT_TRUE(
      same_value(p.saves.at(s2.name()), Value::list({Value::integer(2), Value::real(2.5), Value::boolean(true)})));
}

TEST(DslProxy, RandnLikeAndCompareMethods) {
  auto b = std::make_shared<GraphBuilder>();
  Proxy h = output_of(b, "model.layers.0");
  Saved r = randn_like(h, 99).save();
  Saved c = (h.lt(0) != h.ge(0)).save();
  FakeProvider p;
  run_graph(b->finish(), p);
  EXPECT_EQ(p.saves.at(r.name()).as_tensor().sizes(), at::IntArrayRef({2, 4}));
  EXPECT_TRUE(at::all(p.saves.at(c.name()).as_tensor()).item<bool>());
}

}  // namespace
}  // namespace nnsight::testing
