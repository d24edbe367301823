// Pointwise functions and normalisations: abs, exp, log, sqrt, tanh, sigmoid,
// relu, gelu, softmax, log_softmax.
#include "dsl/ops/registry.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>

namespace nnsight::dsl {

void register_activation_ops(OpRegistry& r) {
  struct U {
    const char* name;
    const char* doc;
    OpFn fn;
  };
  const U unary[] = {
      {"abs", "at::abs(self)", [](const OpArgs& a) -> Value { return at::abs(a.tensor(0)); }},
      {"exp", "at::exp(self)", [](const OpArgs& a) -> Value { return at::exp(a.tensor(0)); }},
      {"log", "at::log(self)", [](const OpArgs& a) -> Value { return at::log(a.tensor(0)); }},
      {"sqrt", "at::sqrt(self)", [](const OpArgs& a) -> Value { return at::sqrt(a.tensor(0)); }},
      {"tanh", "at::tanh(self)", [](const OpArgs& a) -> Value { return at::tanh(a.tensor(0)); }},
      {"sigmoid", "at::sigmoid(self)", [](const OpArgs& a) -> Value { return at::sigmoid(a.tensor(0)); }},
      {"relu", "at::relu(self)", [](const OpArgs& a) -> Value { return at::relu(a.tensor(0)); }},
  };
  for (const U& u : unary) r.add(u.name, "activation", u.doc).tensor("self").returns(kinds::Tensor).impl(u.fn);

  r.add("gelu", "activation", "at::gelu(self, approximate) with approximate \"none\" or \"tanh\"")
      .tensor("self")
      .param("approximate", kinds::String, Value::string("none"))
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value {
        const std::string& approx = a.string(1);
        if (approx != "none" && approx != "tanh") a.fail(1, "must be \"none\" or \"tanh\", got \"" + approx + "\"");
        return at::gelu(a.tensor(0), approx);
      });
  r.add("softmax", "activation", "at::softmax(self, dim)")
      .tensor("self")
      .integer("dim")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::softmax(a.tensor(0), a.integer(1)); });
  r.add("log_softmax", "activation", "at::log_softmax(self, dim)")
      .tensor("self")
      .integer("dim")
      .returns(kinds::Tensor)
      .impl([](const OpArgs& a) -> Value { return at::log_softmax(a.tensor(0), a.integer(1)); });
}

}  // namespace nnsight::dsl
