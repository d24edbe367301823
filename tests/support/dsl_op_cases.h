// One case per use of each registered op: a small graph (inputs come from
// Gets of "in<k>.output" at step 0, the result is saved as "out") and the
// LibTorch (or hand-computed) reference it must equal. Shared by the op tests
// and the round-trip tests, which together cover every op.
#pragma once

#include "dsl/builder.h"
#include "dsl/graph.h"
#include "dsl/value.h"

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace nnsight::testing {

// Records nodes for a case.
struct CaseBuilder {
  std::shared_ptr<dsl::GraphBuilder> b = std::make_shared<dsl::GraphBuilder>();
  dsl::NodeId in(int k);  // Get "in<k>.output" @ 0
  dsl::NodeId c(dsl::Value v);
  dsl::NodeId i(int64_t v) { return c(dsl::Value::integer(v)); }
  dsl::NodeId d(double v) { return c(dsl::Value::real(v)); }
  dsl::NodeId t(bool v) { return c(dsl::Value::boolean(v)); }
  dsl::NodeId ints(std::vector<int64_t> v);
  dsl::NodeId op(const std::string& name, std::vector<dsl::NodeId> args);
};

struct OpCase {
  std::string op;     // the registered op this case covers
  std::string label;  // what variant it is
  // Random inputs (passed as in0, in1, ...).
  std::function<std::vector<at::Tensor>(at::Generator&)> inputs;
  // Records the computation and returns the node to save as "out".
  std::function<dsl::NodeId(CaseBuilder&)> build;
  // The expected value of "out", computed directly with LibTorch.
  std::function<dsl::Value(const std::vector<at::Tensor>&)> reference;
};

const std::vector<OpCase>& op_cases();

// The case's graph (with the Save of "out").
dsl::Graph build_case_graph(const OpCase& c);

}  // namespace nnsight::testing
