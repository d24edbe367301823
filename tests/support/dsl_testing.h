// Small helpers shared by the DSL tests.
#pragma once

#include "dsl/evaluate.h"
#include "dsl/graph.h"
#include "dsl/validate.h"
#include "dsl/value.h"
#include "support/dsl_fake_provider.h"

#include <gtest/gtest.h>

#include <string>

namespace nnsight::testing {

// Exact equality (dtype, shape, bytes), with a readable failure message.
::testing::AssertionResult same_value(const dsl::Value& got, const dsl::Value& want);

// Validates and runs g against p; returns the status.
dsl::EvalStatus run_graph(const dsl::Graph& g, FakeProvider& p, const dsl::FunctionRegistry* functions = nullptr);

// The message of the exception f throws (fails the test if none or another type).
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return {};
}

}  // namespace nnsight::testing
