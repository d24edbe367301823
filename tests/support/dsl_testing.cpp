#include "support/dsl_testing.h"

#include <ATen/ATen.h>

#include <sstream>

namespace nnsight::testing {

::testing::AssertionResult same_value(const dsl::Value& got, const dsl::Value& want) {
  if (dsl::identical(got, want)) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << "got " << got.describe() << ", want " << want.describe();
  if (got.is_tensor() && want.is_tensor()) os << "\ngot:\n" << got.as_tensor() << "\nwant:\n" << want.as_tensor();
  return ::testing::AssertionFailure() << os.str();
}

dsl::EvalStatus run_graph(const dsl::Graph& g, FakeProvider& p, const dsl::FunctionRegistry* functions) {
  dsl::ValidatedGraph vg = dsl::validate(g, dsl::ValidateOptions().with_functions(functions));
  return dsl::evaluate(vg, p, dsl::EvalOptions().with_functions(functions));
}

}  // namespace nnsight::testing
