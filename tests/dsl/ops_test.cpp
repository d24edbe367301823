// Every registered op against the LibTorch call it stands for (the cases are
// in tests/support/dsl_op_cases.cpp), on random inputs.
#include "dsl/ops/registry.h"
#include "support/dsl_op_cases.h"
#include "support/dsl_testing.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <set>

namespace nnsight::testing {
namespace {

TEST(DslOps, EveryCaseMatchesLibTorch) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(42);
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.op + " " + c.label);
    std::vector<at::Tensor> inputs = c.inputs(gen);
    FakeProvider p;
    p.set_default_tensors(false);
    for (size_t k = 0; k < inputs.size(); ++k)
      p.put("in" + std::to_string(k) + ".output", 0, dsl::Value(inputs[k].clone()));
    dsl::Graph g = build_case_graph(c);
    ASSERT_EQ(run_graph(g, p), dsl::EvalStatus::Completed);
    ASSERT_TRUE(p.saves.count("out"));
    EXPECT_TRUE(same_value(p.saves["out"], c.reference(inputs)));
  }
}

TEST(DslOps, EveryRegisteredOpHasACase) {
  std::set<std::string> covered;
  for (const OpCase& c : op_cases()) covered.insert(c.op);
  for (const dsl::OpDef& d : dsl::OpRegistry::global().ops())
    EXPECT_TRUE(covered.count(d.name)) << "op '" << d.name << "' has no case in tests/support/dsl_op_cases.cpp";
  for (const std::string& name : covered)
    EXPECT_NE(dsl::OpRegistry::global().find(name), nullptr) << "case for unregistered op " << name;
}

TEST(DslOps, RandnLikeIsDeterministicPerSeedAndFollowsDtype) {
  auto run = [](at::Tensor like, int64_t seed) {
    CaseBuilder b;
    dsl::NodeId x = b.c(dsl::Value(like));
    b.b->save(b.op("randn_like", {x, b.i(seed)}), "r", dsl::SaveMode::Replace, SourceLoc{});
    FakeProvider p;
    run_graph(b.b->finish(), p);
    return p.saves["r"].as_tensor();
  };
  at::Tensor a = run(at::zeros({4, 8}), 7), b = run(at::zeros({4, 8}), 7), c = run(at::zeros({4, 8}), 8);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, c));
  at::Tensor h = run(at::zeros({4, 8}, at::kHalf), 7);
  EXPECT_EQ(h.scalar_type(), at::kHalf);
  EXPECT_TRUE(at::equal(h, a.to(at::kHalf)));  // drawn in float32, then converted
}

TEST(DslOps, ErrorsNameTheParameter) {
  CaseBuilder b;
  dsl::NodeId x = b.c(dsl::Value(at::zeros({2})));
  dsl::NodeId bad = b.op("gelu", {x, b.c(dsl::Value::string("cubic"))});
  b.b->save(bad, "r", dsl::SaveMode::Replace, SourceLoc{});
  FakeProvider p;
  std::string msg = error_of<dsl::EvalError>([&] { run_graph(b.b->finish(), p); });
  EXPECT_NE(msg.find("'approximate'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cubic"), std::string::npos) << msg;
}

TEST(DslOps, IntegerOverflowAndDivisionByZeroAreErrors) {
  for (auto [op, a, b] : {std::tuple<const char*, int64_t, int64_t>{"add", INT64_MAX, 1},
                          {"mul", INT64_MAX / 2, 3},
                          {"pow", 10, 40},
                          {"div", 1, 0}}) {
    CaseBuilder cb;
    cb.b->save(cb.op(op, {cb.i(a), cb.i(b)}), "r", dsl::SaveMode::Replace, SourceLoc{});
    FakeProvider p;
    std::string msg = error_of<dsl::EvalError>([&] { run_graph(cb.b->finish(), p); });
    EXPECT_TRUE(msg.find("overflow") != std::string::npos || msg.find("division by zero") != std::string::npos)
        << op << ": " << msg;
  }
}

}  // namespace
}  // namespace nnsight::testing
