// Cost of the intervention graph's life cycle for a typical graph: record
// it, encode it for transport, decode and validate it on the worker, and run
// it. The typical graph is a steering intervention plus a saved softmax:
// 10 nodes, one 576-float constant (the default model's hidden size).
//
//   ./build/bench/dsl_bench --benchmark_counters_tabular=true
#include "dsl/binary_codec.h"
#include "dsl/builder.h"
#include "dsl/evaluate.h"
#include "dsl/json_codec.h"
#include "dsl/validate.h"

#include <nnsight/proxy.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

namespace {

using namespace nnsight;
using dsl::NodeId;
using dsl::StepSpec;
using dsl::Value;

const at::Tensor& steering_vector() {
  static const at::Tensor v = at::randn({576});
  return v;
}

// The typical graph through the internal builder (what the tracing layer drives).
dsl::Graph build_typical() {
  auto b = std::make_shared<dsl::GraphBuilder>(1, 0);
  SourceLoc loc{"examples/steering.cpp", 21};
  NodeId h = b->get("model.layers.5.output", StepSpec::fixed(0), loc);  // 0
  NodeId v = b->constant(Value(steering_vector()), loc);                // 1
  NodeId k = b->constant(Value::real(4.0), loc);                        // 2
  NodeId kv = b->op("mul", {v, k}, loc);                                // 3
  NodeId sum = b->op("add", {h, kv}, loc);                              // 4
  b->set("model.layers.5.output", StepSpec::fixed(0), sum, loc);        // 5
  NodeId lg = b->get("logits", StepSpec::fixed(0), loc);                // 6
  NodeId dim = b->constant(Value::integer(-1), loc);                    // 7
  NodeId p = b->op("softmax", {lg, dim}, loc);                          // 8
  b->save(p, "probs", dsl::SaveMode::Replace, loc);                     // 9
  return b->finish();
}

// The same graph written with the public proxy API.
dsl::Graph build_typical_with_proxies() {
  auto b = std::make_shared<dsl::GraphBuilder>(1, 0);
  SourceLoc loc{"envoy", 0};
  Proxy h(b, b->get("model.layers.5.output", StepSpec::fixed(0), loc));
  Proxy(b, b->get("model.layers.5.output", StepSpec::fixed(0), loc)) =
      h + Proxy(b, b->constant(Value(steering_vector()), loc)) * 4.0;
  Proxy logits(b, b->get("logits", StepSpec::fixed(0), loc));
  logits.softmax(-1).save("probs");
  return b->finish();
}

void BM_DslTypicalGraphLifeCycle(benchmark::State& state) {
  std::string bytes;
  for (auto _ : state) {
    dsl::Graph g = build_typical();
    bytes.clear();
    dsl::encode_binary(g, bytes);
    dsl::ValidatedGraph vg = dsl::validate(dsl::decode_binary(bytes));
    benchmark::DoNotOptimize(vg);
  }
  state.counters["nodes"] = 10;
  state.counters["encoded_bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_DslTypicalGraphLifeCycle);

void BM_DslBuild(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(build_typical());
}
BENCHMARK(BM_DslBuild);

void BM_DslBuildWithProxies(benchmark::State& state) {
  size_t nodes = 0;
  for (auto _ : state) {
    dsl::Graph g = build_typical_with_proxies();
    nodes = g.nodes.size();
    benchmark::DoNotOptimize(g);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
}
BENCHMARK(BM_DslBuildWithProxies);

void BM_DslEncodeBinary(benchmark::State& state) {
  dsl::Graph g = build_typical();
  std::string bytes;
  for (auto _ : state) {
    bytes.clear();
    dsl::encode_binary(g, bytes);
    benchmark::DoNotOptimize(bytes.data());
  }
  state.counters["encoded_bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_DslEncodeBinary);

void BM_DslDecodeBinary(benchmark::State& state) {
  std::string bytes = dsl::encode_binary(build_typical());
  for (auto _ : state) benchmark::DoNotOptimize(dsl::decode_binary(bytes));
}
BENCHMARK(BM_DslDecodeBinary);

void BM_DslValidate(benchmark::State& state) {
  dsl::Graph g = build_typical();
  for (auto _ : state) benchmark::DoNotOptimize(dsl::validate(g));
}
BENCHMARK(BM_DslValidate);

void BM_DslJsonRoundTrip(benchmark::State& state) {
  dsl::Graph g = build_typical();
  std::string json;
  for (auto _ : state) {
    json = dsl::to_json(g);
    benchmark::DoNotOptimize(dsl::from_json(json));
  }
  state.counters["json_bytes"] = static_cast<double>(json.size());
}
BENCHMARK(BM_DslJsonRoundTrip);

// Values ready at once: the interpreter's own cost plus the ops'.
class ReadyProvider : public dsl::Provider {
 public:
  at::Tensor hidden = at::randn({1, 576});
  at::Tensor logits = at::randn({1, 49152});
  Value get(const ProviderKey& key, int64_t) override {
    return key.kind == KeyKind::Logits ? Value(logits) : Value(hidden);
  }
  void set(const ProviderKey&, int64_t, Value) override {}
  void save(const std::string&, const Value& v, dsl::SaveMode) override { benchmark::DoNotOptimize(&v); }
};

void BM_DslEvaluate(benchmark::State& state) {
  dsl::ValidatedGraph vg = dsl::validate(build_typical());
  ReadyProvider p;
  for (auto _ : state) dsl::evaluate(vg, p);
}
BENCHMARK(BM_DslEvaluate);

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
