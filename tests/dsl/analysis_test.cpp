// Schedule analysis: accesses in program order, the point each node's value
// exists at, and what a cross-invoke reference needs from the other invoke.
#include "dsl/analysis.h"
#include "dsl/builder.h"

#include <gtest/gtest.h>

#include <functional>

namespace nnsight::testing {
namespace {

using dsl::NodeId;
using dsl::StepSpec;
using dsl::Value;

TEST(DslAnalysis, AccessesPointsAndExternalNeeds) {
  SourceLoc loc{"a.cpp", 1};
  auto b0 = std::make_shared<dsl::GraphBuilder>(1, 0);
  NodeId c0 = b0->constant(Value::integer(1), loc);                       // 0: before any access
  NodeId g0 = b0->get("model.layers.2.output", StepSpec::fixed(0), loc);  // 1: access 0
  NodeId m0 = b0->op("mean", {g0}, loc);                                  // 2
  NodeId it = b0->begin_iter(dsl::IterRange::range(1, 3), loc);           // 3
  NodeId cond = b0->op("eq", {it, b0->constant(Value::integer(2), loc)}, loc);
  b0->begin_cond(cond, loc);
  NodeId g1 = b0->get("logits", StepSpec::iter(0), loc);  // access 1 (conditional)
  b0->end_cond(loc);
  b0->set("samples", StepSpec::iter(1), g1, loc);  // access 2
  b0->end_iter(loc);
  dsl::Graph graph0 = b0->finish();

  auto b1 = std::make_shared<dsl::GraphBuilder>(1, 1);
  NodeId h1 = b1->get("model.layers.5.output", StepSpec::fixed(0), loc);
  NodeId e1 = b1->external(0, m0, loc);
  NodeId e2 = b1->external(0, c0, loc);
  b1->set("model.layers.5.output", StepSpec::fixed(0), b1->op("add", {h1, e1}, loc), loc);
  dsl::Graph graph1 = b1->finish();

  std::vector<dsl::GraphAnalysis> a = dsl::analyze_trace({&graph0, &graph1});
  const dsl::GraphAnalysis& a0 = a[0];
  ASSERT_EQ(a0.accesses.size(), 3u);
  EXPECT_EQ(a0.accesses[0].key, "model.layers.2.output");
  EXPECT_EQ(a0.accesses[0].iter, dsl::kNoNode);
  EXPECT_EQ(a0.accesses[1].key, "logits");
  EXPECT_EQ(a0.accesses[1].iter, it);
  EXPECT_EQ(a0.accesses[1].range, dsl::IterRange::range(1, 3));
  EXPECT_TRUE(a0.accesses[1].conditional);
  EXPECT_TRUE(a0.accesses[2].is_set);
  EXPECT_EQ(a0.accesses[2].step, StepSpec::iter(1));
  EXPECT_FALSE(a0.accesses[2].conditional);
  EXPECT_EQ(a0.point_of[c0], -1);
  EXPECT_EQ(a0.point_of[m0], 0);
  EXPECT_EQ(a0.point_of[g1], 1);

  const dsl::GraphAnalysis& a1 = a[1];
  ASSERT_EQ(a1.externals.size(), 2u);
  EXPECT_EQ(a1.externals[0].node, e1);
  EXPECT_EQ(a1.externals[0].target, m0);
  ASSERT_TRUE(a1.externals[0].needed.has_value());
  EXPECT_EQ(a1.externals[0].needed->key, "model.layers.2.output");  // invoke 0 must have passed layer 2
  ASSERT_TRUE(a1.externals[0].at.has_value());
  EXPECT_EQ(a1.externals[0].at->key, "model.layers.5.output");  // by the time invoke 1 is at layer 5
  EXPECT_EQ(a1.externals[1].node, e2);
  EXPECT_FALSE(a1.externals[1].needed.has_value());  // a constant exists from the start
}

// Which graphs' module reads may be served after the forward: those that
// write nothing the forward goes on with.
TEST(DslAnalysis, LeavesForwardAloneOnlyForGraphsThatDoNotWriteTheModel) {
  SourceLoc loc{"a.cpp", 1};
  using Edit = std::function<void(dsl::GraphBuilder&, NodeId)>;
  // A graph that reads layer 2, saves a logit lens of it, then does `edit` with the value.
  auto graph = [&](const Edit& edit) {
    auto b = std::make_shared<dsl::GraphBuilder>(1, 0);
    NodeId h = b->get("model.layers.2.output", StepSpec::fixed(0), loc);
    b->save(b->call("lm_head", h, loc), "lens", dsl::SaveMode::Replace, loc);
    edit(*b, h);
    return b->finish();
  };
  auto nothing = [](dsl::GraphBuilder&, NodeId) {};
  EXPECT_TRUE(dsl::leaves_forward_alone(graph(nothing)));
  EXPECT_TRUE(dsl::leaves_forward_alone(graph([&](dsl::GraphBuilder& b, NodeId h) {
    NodeId l = b.get("logits", StepSpec::fixed(0), loc);
    b.set("logits", StepSpec::fixed(0), b.op("mul", {l, b.constant(Value::real(0.5), loc)}, loc), loc);
  }))) << "logits follow the forward";
  EXPECT_FALSE(dsl::leaves_forward_alone(
      graph([&](dsl::GraphBuilder& b, NodeId h) { b.set("model.layers.3.input", StepSpec::fixed(0), h, loc); })));
  EXPECT_FALSE(dsl::leaves_forward_alone(graph([&](dsl::GraphBuilder& b, NodeId h) {
    b.op("setitem", {h, b.constant(Value::integer(0), loc), b.constant(Value::real(0.0), loc)}, loc);
  }))) << "in place, into the model's own tensor";
  EXPECT_FALSE(dsl::leaves_forward_alone(graph([&](dsl::GraphBuilder& b, NodeId h) { b.apply("f", {h}, loc); })));
  EXPECT_FALSE(dsl::leaves_forward_alone(
      graph([&](dsl::GraphBuilder& b, NodeId h) { b.backward(b.op("sum", {h}, loc), loc); })));
}

}  // namespace
}  // namespace nnsight::testing
