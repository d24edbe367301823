// Validation: each rule's message names the node, its op and the user's
// source location; limits are enforced for graphs built in memory too.
#include "dsl/builder.h"
#include "dsl/errors.h"
#include "dsl/validate.h"
#include "support/dsl_testing.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace nnsight::testing {
namespace {

using dsl::Graph;
using dsl::Node;
using dsl::NodeKind;
using dsl::Value;

// Hand-assembled graphs, so that rules the builder already enforces can be
// broken on purpose.
struct G {
  Graph g;
  dsl::NodeId add(Node n, uint32_t line) {
    n.loc = SourceLoc{"v.cpp", line};
    g.nodes.push_back(std::move(n));
    return static_cast<dsl::NodeId>(g.nodes.size() - 1);
  }
  dsl::NodeId c(Value v, uint32_t line = 1) {
    Node n;
    n.value = std::move(v);
    return add(std::move(n), line);
  }
  dsl::NodeId op(const std::string& name, std::vector<dsl::NodeId> args, uint32_t line) {
    Node n;
    n.kind = NodeKind::Op;
    n.name = name;
    n.args = std::move(args);
    return add(std::move(n), line);
  }
  dsl::NodeId get(const std::string& key, dsl::StepSpec s, uint32_t line = 1) {
    Node n;
    n.kind = NodeKind::Get;
    n.name = key;
    n.step = s;
    return add(std::move(n), line);
  }
  dsl::NodeId set(const std::string& key, dsl::StepSpec s, dsl::NodeId v, uint32_t line = 1) {
    Node n;
    n.kind = NodeKind::Set;
    n.name = key;
    n.step = s;
    n.args = {v};
    return add(std::move(n), line);
  }
  dsl::NodeId kind(NodeKind k, uint32_t line = 1, std::vector<dsl::NodeId> args = {}) {
    Node n;
    n.kind = k;
    n.args = std::move(args);
    return add(std::move(n), line);
  }
  dsl::NodeId iter(dsl::IterRange r, uint32_t line = 1) {
    Node n;
    n.kind = NodeKind::Iter;
    n.range = r;
    return add(std::move(n), line);
  }
  dsl::NodeId save(const std::string& name, dsl::NodeId v, uint32_t line = 1) {
    Node n;
    n.kind = NodeKind::Save;
    n.name = name;
    n.args = {v};
    return add(std::move(n), line);
  }
};

std::string invalid(const Graph& g, const dsl::ValidateOptions& o = dsl::ValidateOptions()) {
  return error_of<dsl::ValidationError>([&] { dsl::validate(g, o); });
}

TEST(DslValidate, ErrorsCarryNodeOpAndLocation) {
  G g;
  g.c(Value::integer(1));
  g.op("softmax", {0, 0}, 12);
  try {
    dsl::validate(g.g);
    FAIL();
  } catch (const dsl::ValidationError& e) {
    EXPECT_EQ(e.node(), 1u);
    EXPECT_EQ(e.loc(), (SourceLoc{"v.cpp", 12}));
    EXPECT_STREQ(
        e.what(),
        "node 1 (op 'softmax') at v.cpp:12: argument 0 ('self') of 'softmax' must be tensor, but node 0 is int");
  }
}

TEST(DslValidate, OpNamesAndSignatures) {
  G a;
  a.c(Value(at::ones({2})));
  a.op("softmaxx", {0}, 3);
  EXPECT_EQ(invalid(a.g), "node 1 (op 'softmaxx') at v.cpp:3: unknown op 'softmaxx'");
  G b;
  b.c(Value(at::ones({2})));
  b.op("softmax", {0}, 4);
  EXPECT_NE(invalid(b.g).find("'softmax' takes 2 arguments, got 1"), std::string::npos);
  G c;
  c.c(Value(at::ones({2})));
  c.op("sum", {0, 0, 0, 0}, 4);
  EXPECT_NE(invalid(c.g).find("'sum' takes 1 to 3 arguments, got 4"), std::string::npos);
  // Optional trailing arguments may be omitted; an 'any' kind (a Get) passes statically.
  G d;
  d.get("model.out.output", dsl::StepSpec::fixed(0));
  d.op("sum", {0}, 5);
  d.op("topk", {0, d.c(Value::integer(2))}, 6);
  EXPECT_NO_THROW(dsl::validate(d.g));
  // The result kind flows: max over a dim is a tuple, which softmax rejects.
  G e;
  e.c(Value(at::ones({2, 2})));
  e.op("max", {0, e.c(Value::integer(0))}, 7);
  e.op("softmax", {2, e.c(Value::integer(0))}, 8);
  EXPECT_NE(invalid(e.g).find("must be tensor, but node 2 is tuple"), std::string::npos);
}

TEST(DslValidate, ReferencesPointBackwardsToValues) {
  G a;
  a.op("neg", {1}, 2);
  a.c(Value::integer(1));
  EXPECT_EQ(invalid(a.g),
            "node 0 (op 'neg') at v.cpp:2: argument 0 refers to node 1, which does not come before it (references "
            "must point backwards)");
  G b;
  dsl::NodeId x = b.c(Value(at::ones({1})));
  dsl::NodeId s = b.set("a.output", dsl::StepSpec::fixed(0), x);
  b.op("neg", {s}, 3);
  EXPECT_NE(invalid(b.g).find("refers to node 1 (set 'a.output' @ 0) at v.cpp:1, which has no value"),
            std::string::npos);
  G c;
  c.c(Value(at::ones({1})));
  c.op("neg", {1000000}, 3);
  EXPECT_NE(invalid(c.g).find("refers to node 1000000"), std::string::npos);
}

TEST(DslValidate, KeysAndSteps) {
  for (const char* bad : {"", "foo", ".output", "model..x.output", "model.x.outputs", "model x.output", "logits2"}) {
    G g;
    g.get(bad, dsl::StepSpec::fixed(0));
    EXPECT_NE(invalid(g.g).find("is not a provider key"), std::string::npos) << bad;
  }
  for (const char* good : {"logits", "samples", "result", "model.layers.0.output", "lm_head.input", "a.inputs"}) {
    G g;
    g.get(good, dsl::StepSpec::fixed(3));
    EXPECT_NO_THROW(dsl::validate(g.g)) << good;
  }
  G neg;
  neg.get("logits", dsl::StepSpec::fixed(-1));
  EXPECT_NE(invalid(neg.g).find("step -1 is negative"), std::string::npos);
  G far;
  far.get("logits", dsl::StepSpec::fixed(int64_t{1} << 40));
  EXPECT_NE(invalid(far.g).find("exceeds the limit"), std::string::npos);
  G outside;
  outside.get("logits", dsl::StepSpec::iter(0));
  EXPECT_NE(invalid(outside.g).find("outside any iter block"), std::string::npos);
}

TEST(DslValidate, IterationRanges) {
  auto one = [](dsl::IterRange r) {
    G g;
    g.iter(r, 9);
    g.get("logits", dsl::StepSpec::iter(0));
    g.kind(NodeKind::End);
    return g.g;
  };
  EXPECT_NO_THROW(dsl::validate(one(dsl::IterRange::range(0, 3))));
  EXPECT_NO_THROW(dsl::validate(one(dsl::IterRange::range(2, 2))));  // empty range
  EXPECT_NO_THROW(dsl::validate(one(dsl::IterRange::all_from(1))));
  EXPECT_NE(invalid(one(dsl::IterRange::range(-1, 3))).find("start -1"), std::string::npos);
  EXPECT_NE(invalid(one(dsl::IterRange::range(5, 3))).find("stop 3 is outside [start 5"), std::string::npos);
  EXPECT_NE(invalid(one(dsl::IterRange::range(0, 3, 0))).find("stride 0"), std::string::npos);
  EXPECT_NE(invalid(one(dsl::IterRange::range(0, int64_t{1} << 40))).find("stop"), std::string::npos);
  // Nested bounded iterations multiply.
  G nested;
  nested.iter(dsl::IterRange::range(0, 2000));
  nested.iter(dsl::IterRange::range(0, 2000));
  nested.kind(NodeKind::End);
  nested.kind(NodeKind::End);
  EXPECT_NE(invalid(nested.g).find("nested iterations run 4000000 times"), std::string::npos);
}

TEST(DslValidate, AllIterationNeedsAnUnconditionalAccessAtItsStep) {
  G none;
  none.iter(dsl::IterRange::all_from(0), 5);
  none.c(Value::integer(1));
  none.kind(NodeKind::End);
  EXPECT_NE(invalid(none.g).find("node 0 (iter) at v.cpp:5: an iteration over all steps needs a get or set"),
            std::string::npos);
  G conditional;
  conditional.iter(dsl::IterRange::all_from(0), 5);
  dsl::NodeId t = conditional.c(Value::boolean(true));
  conditional.kind(NodeKind::Cond, 1, {t});
  conditional.get("logits", dsl::StepSpec::iter(0));
  conditional.kind(NodeKind::End);
  conditional.kind(NodeKind::End);
  EXPECT_NE(invalid(conditional.g).find("needs a get or set"), std::string::npos);
  G fixed;
  fixed.iter(dsl::IterRange::all_from(0), 5);
  fixed.get("logits", dsl::StepSpec::fixed(0));
  fixed.kind(NodeKind::End);
  EXPECT_NE(invalid(fixed.g).find("needs a get or set"), std::string::npos);
  G set;
  set.iter(dsl::IterRange::all_from(0), 5);
  set.set("samples", dsl::StepSpec::iter(0), set.c(Value(at::zeros({1}, at::kLong))));
  set.kind(NodeKind::End);
  EXPECT_NO_THROW(dsl::validate(set.g));
}

TEST(DslValidate, BlockStructure) {
  G end;
  end.kind(NodeKind::End, 4);
  EXPECT_EQ(invalid(end.g), "node 0 (end) at v.cpp:4: end without an open iter or cond block");
  G open;
  open.c(Value::boolean(true));
  open.kind(NodeKind::Cond, 6, {0});
  EXPECT_EQ(invalid(open.g), "node 1 (cond) at v.cpp:6: block is never closed (missing end)");
  G else_in_iter;
  else_in_iter.iter(dsl::IterRange::range(0, 1));
  else_in_iter.kind(NodeKind::Else, 7);
  EXPECT_NE(invalid(else_in_iter.g).find("else outside a cond block"), std::string::npos);
  G two_else;
  two_else.c(Value::boolean(true));
  two_else.kind(NodeKind::Cond, 1, {0});
  two_else.kind(NodeKind::Else);
  two_else.kind(NodeKind::Else, 8);
  EXPECT_NE(invalid(two_else.g).find("second else"), std::string::npos);
  G nested;
  nested.c(Value::boolean(true));
  for (int i = 0; i < 65; ++i) nested.kind(NodeKind::Cond, 1, {0});
  for (int i = 0; i < 65; ++i) nested.kind(NodeKind::End);
  EXPECT_NE(invalid(nested.g).find("node 65 (cond) at v.cpp:1: blocks nested deeper than the limit of 64"),
            std::string::npos);
  EXPECT_NO_THROW(dsl::validate(nested.g, dsl::ValidateOptions().with_limits(dsl::Limits().depth(65))));
}

TEST(DslValidate, SavesExternalsAndApply) {
  G dup;
  dsl::NodeId x = dup.c(Value::integer(1));
  dup.save("h", x);
  dup.save("h", x, 9);
  EXPECT_EQ(invalid(dup.g), "node 2 (save 'h') at v.cpp:9: save name 'h' is used twice");
  G ext;
  ext.g.invoke = 1;
  Node n;
  n.kind = NodeKind::External;
  n.ext_invoke = 1;
  ext.add(n, 3);
  EXPECT_NE(invalid(ext.g).find("may only refer to earlier invokes"), std::string::npos);

  G app;
  dsl::NodeId a = app.c(Value::integer(1));
  Node call;
  call.kind = NodeKind::Apply;
  call.name = "double";
  call.args = {a, a};
  app.add(call, 4);
  EXPECT_NO_THROW(dsl::validate(app.g));  // no registry: checked when run
  dsl::FunctionRegistry fr;
  EXPECT_NE(invalid(app.g, dsl::ValidateOptions().with_functions(&fr)).find("'double' is not registered"),
            std::string::npos);
  fr.add("double", 1, [](const std::vector<Value>& v) { return v[0]; });
  EXPECT_NE(invalid(app.g, dsl::ValidateOptions().with_functions(&fr)).find("takes 1 arguments, got 2"),
            std::string::npos);
  fr.add("double", 1, 3, [](const std::vector<Value>& v) { return v[0]; });
  EXPECT_NO_THROW(dsl::validate(app.g, dsl::ValidateOptions().with_functions(&fr)));
}

TEST(DslValidate, LimitsApplyToGraphsBuiltInMemory) {
  auto with = [](dsl::Limits l) { return dsl::ValidateOptions().with_limits(l); };
  G nodes;
  for (int i = 0; i < 11; ++i) nodes.c(Value::integer(i));
  EXPECT_NE(invalid(nodes.g, with(dsl::Limits().nodes(10))).find("11 nodes exceeds the limit of 10"),
            std::string::npos);
  G bytes;
  bytes.c(Value(at::ones({100})));
  bytes.c(Value(at::ones({100})), 2);
  EXPECT_NE(invalid(bytes.g, with(dsl::Limits().constant_bytes(700)))
                .find("node 1 (const) at v.cpp:2: constant tensors total"),
            std::string::npos);
  G elems;
  elems.c(Value(at::ones({10, 10})));
  EXPECT_NE(invalid(elems.g, with(dsl::Limits().tensor_elements(99))).find("has 100 elements"), std::string::npos);
  G rank;
  rank.c(Value(at::ones({1, 1, 1, 1})));
  EXPECT_NE(invalid(rank.g, with(dsl::Limits().tensor_rank(3))).find("rank 4"), std::string::npos);
  G str;
  str.c(Value::string(std::string(100, 'x')));
  EXPECT_NE(invalid(str.g, with(dsl::Limits().string_length(99))).find("length 100 exceeds"), std::string::npos);
  G list;
  list.c(Value::list(std::vector<Value>(5, Value::integer(0))));
  EXPECT_NE(invalid(list.g, with(dsl::Limits().list_length(4))).find("list exceeds"), std::string::npos);
  G deep;
  Value v = Value::integer(0);
  for (int i = 0; i < 10; ++i) v = Value::list({v});
  deep.c(v);
  EXPECT_NE(invalid(deep.g, with(dsl::Limits().depth(5))).find("nested deeper"), std::string::npos);
  G enc;
  enc.c(Value(at::ones({1000})));
  EXPECT_NE(invalid(enc.g, with(dsl::Limits().encoded_bytes(1000))).find("bytes, over the limit of 1000"),
            std::string::npos);
  G slice;
  slice.c(Value::index({dsl::IndexItem::make_slice(0, 4, 0)}));
  EXPECT_NE(invalid(slice.g).find("slice step must be positive"), std::string::npos);
  G idx;
  idx.c(Value::index({dsl::IndexItem::make_tensor(at::ones({2}))}));
  EXPECT_NE(invalid(idx.g).find("index tensor must be bool, uint8, int32 or int64"), std::string::npos);
  G utf;
  utf.c(Value::string("\xff"));
  EXPECT_NE(invalid(utf.g).find("not valid UTF-8"), std::string::npos);
}

TEST(DslValidate, TraceLevelExternalChecks) {
  auto b0 = std::make_shared<dsl::GraphBuilder>(1, 0);
  dsl::NodeId x = b0->constant(Value::integer(3), SourceLoc{"t.cpp", 1});
  dsl::NodeId s = b0->save(x, "", dsl::SaveMode::Replace, SourceLoc{"t.cpp", 2});
  Graph g0 = b0->finish();
  auto b1 = std::make_shared<dsl::GraphBuilder>(1, 1);
  b1->external(0, x, SourceLoc{"t.cpp", 3});
  Graph ok = b1->finish();
  EXPECT_NO_THROW(dsl::validate_trace({&g0, &ok}));
  auto b2 = std::make_shared<dsl::GraphBuilder>(1, 1);
  b2->external(0, 99, SourceLoc{"t.cpp", 4});
  Graph missing = b2->finish();
  std::string msg = error_of<dsl::ValidationError>([&] { dsl::validate_trace({&g0, &missing}); });
  EXPECT_NE(msg.find("refers to node 99 of invoke 0, which has only 2 nodes"), std::string::npos) << msg;
  auto b3 = std::make_shared<dsl::GraphBuilder>(1, 1);
  b3->external(0, s, SourceLoc{"t.cpp", 5});
  Graph novalue = b3->finish();
  EXPECT_NE(error_of<dsl::ValidationError>([&] {
              dsl::validate_trace({&g0, &novalue});
            }).find("which has no value"),
            std::string::npos);
  EXPECT_NE(error_of<dsl::ValidationError>([&] {
              dsl::validate_trace({&ok, &g0});
            }).find("says it is invoke"),
            std::string::npos);
}

}  // namespace
}  // namespace nnsight::testing
