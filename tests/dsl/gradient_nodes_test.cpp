// The `grad` and `backward` nodes (docs/ir.md): both encodings round-trip
// them, the validator places and types them, and the evaluator hands the
// provider the metric and the values grad() names, then reads the gradients
// back -- checked against the analytic gradient of a small metric.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dsl/binary_codec.h"
#include "dsl/errors.h"
#include "dsl/evaluate.h"
#include "dsl/json_codec.h"
#include "dsl/validate.h"
#include "support/dsl_fake_provider.h"

namespace nnsight::testing {
namespace {

// metric = sum(h * h) + 3 * sum(l) over h = m.output and l = logits;
// d metric / dh = 2h, d metric / dl = 3.
const char* kGraph = R"({"invoke": 0, "nodes": [
  {"id": 0, "kind": "get", "key": "m.output", "step": 0},
  {"id": 1, "kind": "get", "key": "logits", "step": 0},
  {"id": 2, "kind": "op", "op": "mul", "args": [0, 0]},
  {"id": 3, "kind": "op", "op": "sum", "args": [2]},
  {"id": 4, "kind": "op", "op": "sum", "args": [1]},
  {"id": 5, "kind": "const", "value": 3},
  {"id": 6, "kind": "op", "op": "mul", "args": [4, 5]},
  {"id": 7, "kind": "op", "op": "add", "args": [3, 6]},
  {"id": 8, "kind": "backward", "args": [7], "loc": "g.cpp:8"},
  {"id": 9, "kind": "grad", "args": [0], "loc": "g.cpp:9"},
  {"id": 10, "kind": "grad", "args": [1]},
  {"id": 11, "kind": "save", "name": "gh", "args": [9]},
  {"id": 12, "kind": "save", "name": "gl", "args": [10]}
]})";

TEST(DslGradients, BothEncodingsRoundTrip) {
  dsl::Graph g = dsl::from_json(kGraph);
  ASSERT_EQ(g.nodes[8].kind, dsl::NodeKind::Backward);
  ASSERT_EQ(g.nodes[9].kind, dsl::NodeKind::Grad);
  dsl::Graph back = dsl::decode_binary(dsl::encode_binary(g));
  dsl::Graph again = dsl::from_json(dsl::to_json(back));
  ASSERT_EQ(again.nodes.size(), g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) EXPECT_TRUE(dsl::identical(g.nodes[i], again.nodes[i])) << i;
  EXPECT_NE(dsl::to_json(g).find("\"kind\":\"backward\""), std::string::npos);
}

TEST(DslGradients, TheEvaluatorReadsTheProvidersGradients) {
  FakeProvider p;
  at::AutoGradMode on(true);
  at::Tensor h = at::randn({2, 3}).requires_grad_(true);
  at::Tensor l = at::randn({1, 5}).requires_grad_(true);
  p.put("m.output", 0, dsl::Value(h));
  p.put("logits", 0, dsl::Value(l));
  dsl::evaluate(dsl::validate(dsl::from_json(kGraph)), p);
  EXPECT_EQ(p.backwards, 1);
  EXPECT_TRUE(at::allclose(p.saves.at("gh").as_tensor(), 2 * h.detach()));
  EXPECT_TRUE(at::allclose(p.saves.at("gl").as_tensor(), at::full({1, 5}, 3.0)));
}

std::string validation_error(const std::string& json) {
  try {
    dsl::validate(dsl::from_json(json));
  } catch (const dsl::ValidationError& e) {
    return e.what();
  }
  return "";
}

TEST(DslGradients, TheValidatorPlacesAndTypesThem) {
  // grad before any backward
  std::string e = validation_error(R"({"invoke": 0, "nodes": [
    {"id": 0, "kind": "get", "key": "m.output", "step": 0},
    {"id": 1, "kind": "grad", "args": [0], "loc": "u.cpp:4"},
    {"id": 2, "kind": "op", "op": "sum", "args": [0]},
    {"id": 3, "kind": "backward", "args": [2]}]})");
  EXPECT_NE(e.find("u.cpp:4"), std::string::npos) << e;
  EXPECT_NE(e.find("before any backward()"), std::string::npos) << e;
  // grad of a computed value
  e = validation_error(R"({"invoke": 0, "nodes": [
    {"id": 0, "kind": "get", "key": "m.output", "step": 0},
    {"id": 1, "kind": "op", "op": "sum", "args": [0]},
    {"id": 2, "kind": "backward", "args": [1]},
    {"id": 3, "kind": "grad", "args": [1], "loc": "u.cpp:7"}]})");
  EXPECT_NE(e.find("grad() is taken of a value read from the model"), std::string::npos) << e;
  // grad of samples (not differentiable)
  e = validation_error(R"({"invoke": 0, "nodes": [
    {"id": 0, "kind": "get", "key": "samples", "step": 0},
    {"id": 1, "kind": "get", "key": "logits", "step": 0},
    {"id": 2, "kind": "op", "op": "sum", "args": [1]},
    {"id": 3, "kind": "backward", "args": [2]},
    {"id": 4, "kind": "grad", "args": [0]}]})");
  EXPECT_NE(e.find("grad() is taken of a value read from the model"), std::string::npos) << e;
  // backward of a string
  e = validation_error(R"({"invoke": 0, "nodes": [
    {"id": 0, "kind": "const", "value": "x"},
    {"id": 1, "kind": "backward", "args": [0]}]})");
  EXPECT_NE(e.find("backward() of a"), std::string::npos) << e;
  // an element of a module's tuple is accepted
  EXPECT_EQ(validation_error(R"({"invoke": 0, "nodes": [
    {"id": 0, "kind": "get", "key": "m.output", "step": 0},
    {"id": 1, "kind": "const", "value": 0},
    {"id": 2, "kind": "op", "op": "getitem", "args": [0, 1]},
    {"id": 3, "kind": "op", "op": "sum", "args": [2]},
    {"id": 4, "kind": "backward", "args": [3]},
    {"id": 5, "kind": "grad", "args": [2]}]})"),
            "");
}

TEST(DslGradients, AGradientBelongsToTheValueItWasTakenFor) {
  // In a loop the value is read again each step: its gradient from the
  // previous step's backward is gone, and a grad() before this step's
  // backward fails at its node instead of returning a stale gradient.
  const char* graph = R"({"invoke": 0, "nodes": [
    {"id": 0, "kind": "iter", "start": 0, "stop": 2},
    {"id": 1, "kind": "get", "key": "m.output", "step": {"iter": 0}},
    {"id": 2, "kind": "op", "op": "sum", "args": [1]},
    {"id": 3, "kind": "backward", "args": [2]},
    {"id": 4, "kind": "grad", "args": [1]},
    {"id": 5, "kind": "save", "name": "g", "args": [4], "mode": "append"},
    {"id": 6, "kind": "end"}]})";
  FakeProvider p;
  at::AutoGradMode on(true);
  p.put("m.output", 0, dsl::Value(at::randn({2}).requires_grad_(true)));
  p.put("m.output", 1, dsl::Value(at::randn({3}).requires_grad_(true)));
  dsl::evaluate(dsl::validate(dsl::from_json(graph)), p);
  EXPECT_EQ(p.backwards, 2);
  const auto& list = p.saves.at("g").as_list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(at::equal(list[0].as_tensor(), at::ones({2})));
  EXPECT_TRUE(at::equal(list[1].as_tensor(), at::ones({3})));
}

}  // namespace
}  // namespace nnsight::testing
