// The evaluator against a fake provider: iteration, all() ending cleanly,
// conditions, stop, set, in-place setitem, cross-invoke references, apply,
// errors with source locations, and running inside a Boost.Context fiber.
#include "dsl/builder.h"
#include "dsl/evaluate.h"
#include "support/dsl_testing.h"

#include <ATen/ATen.h>
#include <boost/context/fiber.hpp>
#include <gtest/gtest.h>

namespace nnsight::testing {
namespace {

using dsl::NodeId;
using dsl::StepSpec;
using dsl::Value;

SourceLoc L(uint32_t line) { return SourceLoc{"eval_test.cpp", line}; }

std::shared_ptr<dsl::GraphBuilder> builder(uint32_t invoke = 0) {
  return std::make_shared<dsl::GraphBuilder>(1, invoke);
}

TEST(DslEval, IterRunsTheBodyOncePerStep) {
  auto b = builder();
  NodeId it = b->begin_iter(dsl::IterRange::range(1, 7, 2), L(1));
  NodeId lg = b->get("logits", StepSpec::iter(0), L(2));
  NodeId next = b->get("model.x.output", StepSpec::iter(1), L(3));
  b->save(b->op("add", {b->op("sum", {lg}, L(4)), b->op("sum", {next}, L(4))}, L(4)), "s", dsl::SaveMode::Append, L(4));
  b->save(it, "step", dsl::SaveMode::Replace, L(5));
  b->end_iter(L(6));
  FakeProvider p;
  EXPECT_EQ(run_graph(b->finish(), p), dsl::EvalStatus::Completed);
  using Get = std::pair<std::string, int64_t>;
  EXPECT_EQ(p.gets, (std::vector<Get>{{"logits", 1},
                                      {"model.x.output", 2},
                                      {"logits", 3},
                                      {"model.x.output", 4},
                                      {"logits", 5},
                                      {"model.x.output", 6}}));
  const auto& s = p.saves.at("s").as_list();
  ASSERT_EQ(s.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    int64_t step = 1 + 2 * k;
    at::Tensor want = FakeProvider::default_tensor("logits", step).sum() +
                      FakeProvider::default_tensor("model.x.output", step + 1).sum();
    EXPECT_TRUE(same_value(s[k], Value(want)));
  }
  EXPECT_TRUE(same_value(p.saves.at("step"), Value::integer(5)));  // last iteration's value
}

TEST(DslEval, AllStepsEndsCleanlyWhenTheRequestFinishes) {
  auto b = builder();
  b->begin_iter(dsl::IterRange::all_from(0), L(1));
  NodeId lg = b->get("logits", StepSpec::iter(0), L(2));
  b->save(b->op("argmax", {lg}, L(3)), "tokens", dsl::SaveMode::Append, L(3));
  b->end_iter(L(4));
  NodeId after = b->constant(Value::integer(1), L(5));
  b->save(after, "after", dsl::SaveMode::Replace, L(6));
  FakeProvider p;
  p.finish_at(4);
  EXPECT_EQ(run_graph(b->finish(), p), dsl::EvalStatus::Completed);
  EXPECT_EQ(p.saves.at("tokens").as_list().size(), 4u);  // steps 0..3 survive
  EXPECT_TRUE(p.saves.count("after"));                   // and the graph goes on after the loop
}

TEST(DslEval, RequestFinishedOutsideAllIsAnErrorAtTheNode) {
  auto b = builder();
  b->begin_iter(dsl::IterRange::range(0, 10), L(1));
  b->save(b->get("logits", StepSpec::iter(0), L(22)), "l", dsl::SaveMode::Append, L(3));
  b->end_iter(L(4));
  FakeProvider p;
  p.finish_at(3);
  try {
    run_graph(b->finish(), p);
    FAIL();
  } catch (const dsl::EvalError& e) {
    EXPECT_EQ(e.node(), 1u);
    EXPECT_EQ(e.loc(), L(22));
    EXPECT_NE(std::string(e.what()).find("eval_test.cpp:22: the request finished before step 3"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(p.saves.at("l").as_list().size(), 3u);  // saves made before the error stay with the provider
}

TEST(DslEval, CondAndElse) {
  for (double x : {2.0, -2.0}) {
    auto b = builder();
    NodeId v = b->constant(Value(at::full({1}, x)), L(1));
    b->begin_cond(b->op("gt", {v, b->constant(Value::integer(0), L(2))}, L(2)), L(2));
    b->save(b->constant(Value::string("positive"), L(3)), "sign", dsl::SaveMode::Replace, L(3));
    b->begin_else(L(4));
    b->save(b->constant(Value::string("negative"), L(5)), "sign2", dsl::SaveMode::Replace, L(5));
    b->end_cond(L(6));
    FakeProvider p;
    run_graph(b->finish(), p);
    EXPECT_EQ(p.saves.count("sign"), x > 0 ? 1u : 0u);
    EXPECT_EQ(p.saves.count("sign2"), x > 0 ? 0u : 1u);
  }
  // A multi-element tensor has no truth value.
  auto b = builder();
  NodeId v = b->constant(Value(at::ones({3})), L(1));
  b->begin_cond(v, L(9));
  b->end_cond(L(10));
  FakeProvider p;
  EXPECT_NE(error_of<dsl::EvalError>([&] { run_graph(b->finish(), p); }).find("eval_test.cpp:9: the truth value"),
            std::string::npos);
}

TEST(DslEval, StopEndsTheRequest) {
  auto b = builder();
  b->begin_iter(dsl::IterRange::all_from(0), L(1));
  NodeId lg = b->get("logits", StepSpec::iter(0), L(2));
  b->save(lg, "l", dsl::SaveMode::Append, L(3));
  b->stop(L(4));
  b->end_iter(L(5));
  FakeProvider p;
  EXPECT_EQ(run_graph(b->finish(), p), dsl::EvalStatus::Stopped);
  EXPECT_EQ(p.stops, 1);
  EXPECT_EQ(p.saves.at("l").as_list().size(), 1u);
}

TEST(DslEval, SetHandsTheNewValueToTheProvider) {
  auto b = builder();
  NodeId h = b->get("model.layers.3.output", StepSpec::fixed(2), L(1));
  NodeId z = b->op("mul", {h, b->constant(Value::integer(0), L(2))}, L(2));
  b->set("model.layers.3.output", StepSpec::fixed(2), z, L(3));
  FakeProvider p;
  run_graph(b->finish(), p);
  ASSERT_EQ(p.sets.size(), 1u);
  EXPECT_EQ(std::get<0>(p.sets[0]), "model.layers.3.output");
  EXPECT_EQ(std::get<1>(p.sets[0]), 2);
  at::Tensor h_value = FakeProvider::default_tensor("model.layers.3.output", 2);
  EXPECT_TRUE(same_value(std::get<2>(p.sets[0]), Value(h_value * 0)));
}

TEST(DslEval, SetitemMutatesTheProvidersTensorInPlace) {
  at::Tensor activation = at::arange(8, at::kFloat).reshape({2, 4});
  at::Tensor expected = activation.clone();
  expected.index_put_({at::indexing::Slice(), -1}, 100.0);
  auto b = builder();
  NodeId h = b->get("model.layers.0.output", StepSpec::fixed(0), L(1));
  NodeId idx = b->constant(Value::index({dsl::IndexItem::make_slice({}, {}), dsl::IndexItem::make_int(-1)}), L(2));
  b->op("setitem", {h, idx, b->constant(Value::real(100.0), L(2))}, L(2));
  FakeProvider p;
  p.put("model.layers.0.output", 0, Value(activation));
  run_graph(b->finish(), p);
  EXPECT_TRUE(at::equal(activation, expected));  // the provider's own tensor changed
  EXPECT_TRUE(p.sets.empty());                   // and no set was needed
}

TEST(DslEval, ConstantsSurviveInPlaceAssignment) {
  auto b = builder();
  NodeId c = b->constant(Value(at::zeros({3})), L(1));
  NodeId s = b->op("setitem", {c, b->constant(Value::integer(0), L(2)), b->constant(Value::integer(5), L(2))}, L(2));
  b->save(s, "s", dsl::SaveMode::Replace, L(3));
  dsl::ValidatedGraph vg = dsl::validate(b->finish());
  for (int run = 0; run < 2; ++run) {
    FakeProvider p;
    dsl::evaluate(vg, p);
    EXPECT_TRUE(same_value(p.saves.at("s"), Value(at::tensor({5.0f, 0.0f, 0.0f}))));
  }
  EXPECT_TRUE(same_value(vg.graph().nodes[c].value, Value(at::zeros({3}))));
}

TEST(DslEval, CrossInvokeReferenceComesFromTheOtherEvaluator) {
  auto b0 = builder(0);
  NodeId h0 = b0->get("model.layers.1.output", StepSpec::fixed(0), L(1));
  NodeId m0 = b0->op("mean", {h0, b0->constant(Value::integer(0), L(2))}, L(2));
  dsl::Graph g0 = b0->finish();
  auto b1 = builder(1);
  NodeId ext = b1->import(*b0, m0, L(3));
  EXPECT_EQ(b1->graph().nodes[ext].kind, dsl::NodeKind::External);
  NodeId h1 = b1->get("model.layers.1.output", StepSpec::fixed(0), L(4));
  b1->set("model.layers.1.output", StepSpec::fixed(0), b1->op("add", {h1, ext}, L(5)), L(5));
  dsl::Graph g1 = b1->finish();
  dsl::validate_trace({&g0, &g1});

  // The runtime's job, done by hand: run invoke 0, then hand its value to invoke 1.
  dsl::ValidatedGraph v0 = dsl::validate(g0), v1 = dsl::validate(g1);
  FakeProvider p0;
  dsl::Evaluator e0(v0, p0);
  e0.run();
  FakeProvider p1;
  p1.put_external(0, m0, e0.value(m0));
  dsl::evaluate(v1, p1);
  at::Tensor h = FakeProvider::default_tensor("model.layers.1.output", 0);
  EXPECT_TRUE(same_value(std::get<2>(p1.sets.at(0)), Value(h + h.mean(0))));
}

TEST(DslEval, ApplyCallsARegisteredFunction) {
  dsl::FunctionRegistry fr;
  fr.add("clamp_to", 2, [](const std::vector<Value>& a) {
    return Value(a[0].as_tensor().clamp(-a[1].as_double(), a[1].as_double()));
  });
  auto b = builder();
  NodeId x = b->constant(Value(at::tensor({-3.0f, 0.5f, 4.0f})), L(1));
  b->save(b->apply("clamp_to", {x, b->constant(Value::real(1.0), L(2))}, L(2)), "c", dsl::SaveMode::Replace, L(3));
  dsl::Graph g = b->finish();
  FakeProvider p;
  run_graph(g, p, &fr);
  EXPECT_TRUE(same_value(p.saves.at("c"), Value(at::tensor({-1.0f, 0.5f, 1.0f}))));
  // Without the function on the worker: an error at the node.
  FakeProvider q;
  dsl::ValidatedGraph vg = dsl::validate(g);
  EXPECT_NE(error_of<dsl::EvalError>([&] {
              dsl::evaluate(vg, q);
            }).find("eval_test.cpp:2: function 'clamp_to' is not registered"),
            std::string::npos);
}

TEST(DslEval, OpErrorsCarryTheSourceLocation) {
  auto b = builder();
  NodeId a = b->constant(Value(at::ones({2, 3})), L(1));
  NodeId c = b->constant(Value(at::ones({4, 5})), L(2));
  b->op("matmul", {a, c}, L(77));
  FakeProvider p;
  try {
    run_graph(b->finish(), p);
    FAIL();
  } catch (const dsl::EvalError& e) {
    EXPECT_EQ(e.loc(), L(77));
    EXPECT_EQ(e.node(), 2u);
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("node 2 (op 'matmul') at eval_test.cpp:77: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find("frame #"), std::string::npos) << "no LibTorch backtrace in messages";
  }
}

TEST(DslEval, ValuesFromBlocksThatDidNotRunAreErrors) {
  auto b = builder();
  NodeId f = b->constant(Value::boolean(false), L(1));
  b->begin_cond(f, L(2));
  NodeId inner = b->constant(Value::integer(1), L(3));
  b->end_cond(L(4));
  b->op("neg", {inner}, L(5));
  FakeProvider p;
  EXPECT_NE(error_of<dsl::EvalError>([&] { run_graph(b->finish(), p); }).find("the block that computes it did not run"),
            std::string::npos);
}

TEST(DslEval, NeverProvidedValuesAreErrorsAtTheNode) {
  auto b = builder();
  b->get("model.nope.output", StepSpec::fixed(0), L(31));
  FakeProvider p;
  p.set_default_tensors(false);
  std::string msg = error_of<dsl::EvalError>([&] { run_graph(b->finish(), p); });
  EXPECT_NE(msg.find("eval_test.cpp:31: the value will never be provided: no value for 'model.nope.output'"),
            std::string::npos)
      << msg;
}

// A provider that throws something that is not a std::exception (as
// boost::context's forced_unwind is not): it must come out untouched.
struct NotAnException {
  int code;
};
class ThrowingProvider : public FakeProvider {
 public:
  dsl::Value get(const ProviderKey&, int64_t) override { throw NotAnException{42}; }
};

TEST(DslEval, ForeignExceptionsPassThroughUntouched) {
  auto b = builder();
  b->get("logits", StepSpec::fixed(0), L(1));
  ThrowingProvider p;
  try {
    run_graph(b->finish(), p);
    FAIL();
  } catch (const NotAnException& e) {
    EXPECT_EQ(e.code, 42);
  }
}

namespace ctx = boost::context;

// The tracing layer's setup in miniature: the evaluator runs in a fiber and
// Provider::get suspends it until the "model" resumes it with the value.
class FiberProvider : public FakeProvider {
 public:
  ctx::fiber* main = nullptr;  // where to switch to while waiting
  std::vector<std::string> waits;
  dsl::Value get(const ProviderKey& key, int64_t step) override {
    waits.push_back(key.str());
    *main = std::move(*main).resume();  // suspend until the model gets here
    return FakeProvider::get(key, step);
  }
};

TEST(DslEval, RunsInsideAFiberAndUnwindsWhenTheFiberIsDestroyed) {
  auto b = builder();
  for (int i = 0; i < 3; ++i)
    b->save(b->get("model.layers." + std::to_string(i) + ".output", StepSpec::fixed(0), L(1)), "h" + std::to_string(i),
            dsl::SaveMode::Replace, L(2));
  dsl::ValidatedGraph vg = dsl::validate(b->finish());

  // Completes when resumed at each point.
  {
    FiberProvider p;
    bool done = false;
    ctx::fiber main_fiber;
    p.main = &main_fiber;
    ctx::fiber f([&](ctx::fiber&& m) {
      main_fiber = std::move(m);
      dsl::evaluate(vg, p);
      done = true;
      return std::move(main_fiber);
    });
    f = std::move(f).resume();  // runs to the first get
    int resumes = 0;
    while (!done) {
      f = std::move(f).resume();
      ++resumes;
    }
    EXPECT_EQ(resumes, 3);
    EXPECT_EQ(p.saves.size(), 3u);
  }
  // Destroyed while suspended in get: forced_unwind runs through the
  // evaluator (which must not swallow it) and the fiber's stack unwinds.
  {
    FiberProvider p;
    bool unwound = false, finished = false;
    struct Guard {
      bool* flag;
      ~Guard() { *flag = true; }
    };
    ctx::fiber main_fiber;
    p.main = &main_fiber;
    {
      ctx::fiber f([&](ctx::fiber&& m) {
        main_fiber = std::move(m);
        Guard g{&unwound};
        dsl::evaluate(vg, p);
        finished = true;
        return std::move(main_fiber);
      });
      f = std::move(f).resume();
      f = std::move(f).resume();  // now waiting at the second get
      EXPECT_EQ(p.waits.size(), 2u);
    }  // ~fiber: unwinds the suspended stack
    EXPECT_TRUE(unwound);
    EXPECT_FALSE(finished);
    EXPECT_EQ(p.saves.size(), 1u);
  }
}

}  // namespace
}  // namespace nnsight::testing
