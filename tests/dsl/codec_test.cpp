// Round trips: builder -> binary -> graph -> JSON -> graph -> binary must be
// byte-identical, the graphs identical, and their evaluations equal; for
// graphs that use every node kind, every value kind and every op.
#include "dsl/binary_codec.h"
#include "dsl/builder.h"
#include "dsl/errors.h"
#include "dsl/json_codec.h"
#include "support/dsl_op_cases.h"
#include "support/dsl_sample_graphs.h"
#include "support/dsl_testing.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <set>

namespace nnsight::testing {
namespace {

using dsl::Graph;
using dsl::Value;

// The full round trip; returns the final graph.
Graph round_trip(const Graph& g) {
  std::string b1 = dsl::encode_binary(g);
  EXPECT_EQ(b1.size(), dsl::encoded_size(g));
  Graph g2 = dsl::decode_binary(b1);
  std::string json = dsl::to_json(g2);
  Graph g3 = dsl::from_json(json);
  std::string b2 = dsl::encode_binary(g3);
  EXPECT_EQ(b1, b2) << "binary -> JSON -> binary is not byte-identical";
  EXPECT_TRUE(dsl::identical(g, g3));
  EXPECT_EQ(dsl::to_json(g3), json);
  EXPECT_EQ(dsl::to_json(dsl::from_json(dsl::to_json(g3, 2))), json);  // pretty form reads back too
  return g3;
}

TEST(DslCodec, EveryOpCaseRoundTripsAndEvaluatesTheSame) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  std::set<std::string> ops;
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.op + " " + c.label);
    Graph g = build_case_graph(c);
    Graph back = round_trip(g);
    std::vector<at::Tensor> inputs = c.inputs(gen);
    FakeProvider p1, p2;
    for (size_t k = 0; k < inputs.size(); ++k) {
      p1.put("in" + std::to_string(k) + ".output", 0, Value(inputs[k].clone()));
      p2.put("in" + std::to_string(k) + ".output", 0, Value(inputs[k].clone()));
    }
    run_graph(g, p1);
    run_graph(back, p2);
    EXPECT_TRUE(same_value(p2.saves.at("out"), p1.saves.at("out")));
    for (const dsl::Node& n : back.nodes)
      if (n.kind == dsl::NodeKind::Op) ops.insert(n.name);
  }
  EXPECT_EQ(ops.size(), dsl::OpRegistry::global().ops().size());
}

TEST(DslCodec, EveryNodeAndValueKindRoundTrips) {
  Graph g = every_kind_graph();
  std::set<dsl::NodeKind> node_kinds;
  std::set<dsl::ValueKind> value_kinds;
  for (const dsl::Node& n : g.nodes) {
    node_kinds.insert(n.kind);
    if (n.kind == dsl::NodeKind::Const) value_kinds.insert(n.value.kind());
  }
  EXPECT_EQ(node_kinds.size(), static_cast<size_t>(dsl::kNumNodeKinds));
  EXPECT_EQ(value_kinds.size(), static_cast<size_t>(dsl::kNumValueKinds));
  Graph back = round_trip(g);
  EXPECT_EQ(back.invoke, 1u);
  EXPECT_EQ(back.nodes[0].loc.file, "tests/dsl/sample \"graph\".cpp");

  // Both evaluate to the same saves.
  auto run = [](const Graph& graph) {
    FakeProvider p;
    p.put_external(0, 3, Value(at::arange(4, at::kFloat)));
    EXPECT_EQ(run_graph(graph, p, &sample_functions()), dsl::EvalStatus::Stopped);
    return p;
  };
  FakeProvider a = run(g), b = run(back);
  ASSERT_EQ(a.saves.size(), b.saves.size());
  for (const auto& [name, v] : a.saves) EXPECT_TRUE(same_value(b.saves.at(name), v)) << name;
  EXPECT_EQ(a.saves.count("never"), 0u);
  EXPECT_EQ(a.saves.at("mlp_sums").as_list().size(), 2u);     // steps 6 and 7
  EXPECT_EQ(a.saves.at("logits_each").as_list().size(), 2u);  // steps 1 and 3
  EXPECT_TRUE(same_value(a.saves.at("scaled"), Value(at::arange(4, at::kFloat) * 2.0)));
}

TEST(DslCodec, DoublesRoundTripExactly) {
  auto b = std::make_shared<dsl::GraphBuilder>();
  std::vector<double> ds = {0.1, 1.0 / 3.0, -0.0, 5e-324, 1.7976931348623157e308, 123456789.123456789, 1e22};
  for (double d : ds) b->constant(Value::real(d), SourceLoc{});
  Graph g = b->finish();
  Graph back = dsl::from_json(dsl::to_json(g));
  for (size_t i = 0; i < ds.size(); ++i) EXPECT_TRUE(same_value(back.nodes[i].value, Value::real(ds[i])));
}

TEST(DslCodec, BinaryLayoutStartsWithMagicVersionAndEndianness) {
  auto b = std::make_shared<dsl::GraphBuilder>(0, 2);
  b->constant(Value::integer(5), SourceLoc{"f.cpp", 9});
  std::string bytes = dsl::encode_binary(b->finish());
  ASSERT_GE(bytes.size(), 7u);
  EXPECT_EQ(bytes.substr(0, 4), "NNSG");
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 1);  // version, little endian u16
  EXPECT_EQ(static_cast<uint8_t>(bytes[5]), 0);
  EXPECT_EQ(static_cast<uint8_t>(bytes[6]), 1);  // cereal's little-endian flag
  EXPECT_EQ(static_cast<uint8_t>(bytes[7]), 2);  // u32 invoke
  // Hand-computed size: header 6 + flag 1 + invoke 4 + file count 8 + "f.cpp" (8 + 5)
  // + node count 8 + node (kind 1 + file 4 + line 4 + value kind 1 + i64 8).
  EXPECT_EQ(bytes.size(), 6u + 1 + 4 + 8 + 13 + 8 + 18);
}

TEST(DslCodec, HandWrittenJsonWithDataArraysRuns) {
  // x = [[1, 2, 3], [4, 5, 6]] (int32 from "data"), y = x[:, -2:] * 0.5, saved.
  const char* json = R"({
    "nodes": [
      {"kind": "const", "value": {"dtype": "int32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}},
      {"kind": "const", "value": {"index": [{"slice": [null, null]}, {"slice": [-2, null]}]}},
      {"kind": "op", "op": "getitem", "args": [0, 1]},
      {"kind": "const", "value": 0.5},
      {"kind": "op", "op": "mul", "args": [2, 3], "loc": "hand.json:5"},
      {"kind": "save", "name": "y", "args": [4]}
    ]})";
  Graph g = dsl::from_json(json);
  EXPECT_EQ(g.nodes[4].loc, (SourceLoc{"hand.json", 5}));
  FakeProvider p;
  run_graph(g, p);
  at::Tensor want = at::tensor({1.0f, 1.5f, 2.5f, 3.0f}).reshape({2, 2});
  EXPECT_TRUE(same_value(p.saves.at("y"), Value(want)));
}

TEST(DslCodec, JsonTensorDataFormsAgree) {
  at::Tensor t = at::tensor({-1.5f, 0.25f, 3.0f});
  Graph g;
  dsl::Node n;
  n.value = Value(t);
  g.nodes.push_back(n);
  std::string json = dsl::to_json(g);
  EXPECT_NE(json.find("\"data_b64\":\"AADAvwAAgD4AAEBA\""), std::string::npos) << json;  // LE float32 bytes
  Graph hand =
      dsl::from_json(R"({"nodes":[{"kind":"const","value":{"dtype":"float32","shape":[3],"data":[-1.5,0.25,3]}}]})");
  EXPECT_EQ(dsl::encode_binary(hand), dsl::encode_binary(g));
}

TEST(DslCodec, JsonErrorsNameNodeAndPointer) {
  struct Case {
    const char* json;
    const char* expect;
  };
  const Case cases[] = {
      {R"({"nodes":[{"kind":"const","value":1},{"kind":"op","op":"neg","args":["x"]}]})", "/nodes/1/args/0 (node 1)"},
      {R"({"nodes":[{"kind":"get","key":"logits","step":{"iter":"a"}}]})", "/nodes/0/step/iter (node 0)"},
      {R"({"nodes":[{"kind":"const","value":{"dtype":"float32","shape":[2],"data":[1]}}]})", "/nodes/0/value/data"},
      {R"({"nodes":[{"kind":"const","value":{"dtype":"float32","shape":[1],"data_b64":"AAA"}}]})",
       "/nodes/0/value/data_b64"},
      {R"({"nodes":[{"kind":"konst"}]})", "/nodes/0/kind"},
      {R"({"nodes":[{"kind":"stop","extra":1}]})", "/nodes/0/extra"},
      {R"({"nodes":[{"id":3,"kind":"stop"}]})", "/nodes/0/id"},
      {R"({"nodes":[{"kind":"const","value":{"index":[{"slice":[1]}]}}]})", "/nodes/0/value/index/0/slice"},
      {R"({"nodes":[{"kind":"const","value":{"dtype":"int8","shape":[1],"data":[300]}}]})", "/nodes/0/value/data/0"},
      {R"({"version":2,"nodes":[]})", "/version"},
      {R"({"nodes":[{"kind":"const","value":1}] )", "syntax error at byte"},
      {R"({"nodes":[{"kind":"iter","stop":"some"}]})", "/nodes/0/stop"},
  };
  for (const Case& c : cases) {
    std::string msg = error_of<dsl::DecodeError>([&] { dsl::from_json(c.json); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.json << "\n -> " << msg;
  }
}

TEST(DslCodec, EncodedSizeOfTypicalGraph) {
  // The benchmark's graph shape: one 576-float steering vector added to a layer output.
  auto b = std::make_shared<dsl::GraphBuilder>();
  SourceLoc loc{"examples/steer.cpp", 12};
  dsl::NodeId h = b->get("model.layers.5.output", dsl::StepSpec::fixed(0), loc);
  dsl::NodeId v = b->constant(Value(at::ones({576})), loc);
  dsl::NodeId s = b->op("add", {h, v}, loc);
  b->set("model.layers.5.output", dsl::StepSpec::fixed(0), s, loc);
  std::string bytes = dsl::encode_binary(b->finish());
  // The tensor dominates: 576 * 4 bytes plus a small fixed overhead.
  EXPECT_GT(bytes.size(), 576u * 4);
  EXPECT_LT(bytes.size(), 576u * 4 + 300);
}

}  // namespace
}  // namespace nnsight::testing
