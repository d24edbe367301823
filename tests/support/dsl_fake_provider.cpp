#include "support/dsl_fake_provider.h"

#include <torch/csrc/autograd/autograd.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <functional>

namespace nnsight::testing {

at::Tensor FakeProvider::default_tensor(const std::string& key, int64_t step) {
  uint64_t seed = std::hash<std::string>()(key) ^ (static_cast<uint64_t>(step) * 0x9e3779b97f4a7c15ull);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({2, 4}, gen, at::TensorOptions().dtype(at::kFloat));
}

dsl::Value FakeProvider::get(const ProviderKey& provider_key, int64_t step) {
  const std::string key = provider_key.str();
  gets.emplace_back(key, step);
  if (finish_at_ && step >= *finish_at_) throw dsl::RequestFinished();
  auto it = values_.find({key, step});
  if (it != values_.end()) return it->second;
  auto all = all_steps_.find(key);
  if (all != all_steps_.end()) return all->second;
  if (!default_tensors_) throw dsl::ValueNeverProvided("no value for '" + key + "' at step " + std::to_string(step));
  at::Tensor t = default_tensor(key, step);
  values_[{key, step}] = dsl::Value(t);  // later gets see the same (possibly mutated) tensor
  return dsl::Value(t);
}

void FakeProvider::set(const ProviderKey& provider_key, int64_t step, dsl::Value value) {
  const std::string key = provider_key.str();
  if (finish_at_ && step >= *finish_at_) throw dsl::RequestFinished();
  sets.emplace_back(key, step, value);
  values_[{key, step}] = std::move(value);
}

void FakeProvider::save(const std::string& name, const dsl::Value& value, dsl::SaveMode mode) {
  dsl::Value copy = value.is_tensor() ? dsl::Value(value.as_tensor().clone()) : value;
  if (mode == dsl::SaveMode::Replace) {
    saves[name] = std::move(copy);
    return;
  }
  auto it = saves.find(name);
  if (it == saves.end()) it = saves.emplace(name, dsl::Value::list({})).first;
  it->second.as_list().push_back(std::move(copy));
}

dsl::Value FakeProvider::external(uint32_t invoke, dsl::NodeId node) {
  auto it = externals_.find({invoke, node});
  if (it == externals_.end())
    throw dsl::ValueNeverProvided("no external value for invoke " + std::to_string(invoke) + " node " +
                                  std::to_string(node));
  return it->second;
}

std::vector<at::Tensor> FakeProvider::backward(const at::Tensor& metric, const std::vector<at::Tensor>& inputs) {
  ++backwards;
  // Values that take no part in autograd (the made-up defaults) get zeros.
  std::vector<at::Tensor> reached;
  for (const auto& x : inputs)
    if (x.requires_grad()) reached.push_back(x);
  std::vector<at::Tensor> grads;
  if (metric.requires_grad() && !reached.empty())
    grads = torch::autograd::grad({metric}, reached, {}, /*retain_graph=*/true, /*create_graph=*/false,
                                  /*allow_unused=*/true);
  std::vector<at::Tensor> out;
  size_t k = 0;
  for (const auto& x : inputs) {
    at::Tensor g = x.requires_grad() && k < grads.size() ? grads[k++] : at::Tensor();
    out.push_back(g.defined() ? g : at::zeros_like(x));
  }
  return out;
}

dsl::Value FakeProvider::call(const std::string& module, const dsl::Value& arg) {
  calls.push_back(module);
  return dsl::Value(arg.as_tensor() * 3 + 1);
}

}  // namespace nnsight::testing
