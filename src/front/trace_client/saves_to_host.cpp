#include "front/trace_client/saves_to_host.h"

#include <exception>
#include <string>

namespace nnsight::tracing {

namespace {
// Calls f on every saved tensor, in one fixed order.
template <typename F>
void for_each_save(std::vector<RequestOutput>& outputs, F&& f) {
  for (auto& o : outputs)
    for (auto& [name, v] : o.saves) {
      if (v.tensor.defined()) f(v.tensor);
      for (auto& t : v.list)
        if (t.defined()) f(t);
    }
}
}  // namespace

SavesToHost::SavesToHost(std::vector<RequestOutput>& outputs) {
  for_each_save(outputs, [&](at::Tensor& t) { any_ = any_ || !t.device().is_cpu(); });
  if (!any_) return;
  std::vector<at::Tensor> tensors;
  for_each_save(outputs, [&](at::Tensor& t) { tensors.push_back(t); });
  copies_ = HostCopies::start(std::move(tensors));
}

bool SavesToHost::land(std::vector<RequestOutput>& outputs) {
  if (!any_) return true;
  try {
    std::vector<at::Tensor> hosts = copies_.wait();
    size_t i = 0;
    for_each_save(outputs, [&](at::Tensor& t) {
      TORCH_CHECK(i < hosts.size(), "SavesToHost::land: other outputs than it started with");
      t = std::move(hosts[i++]);
    });
    return true;
  } catch (const std::exception& e) {
    const std::string why = std::string("moving the trace's saves to the host failed: ") + e.what();
    for (auto& o : outputs)
      if (o.error.empty()) o.error = why;
    return false;
  }
}

}  // namespace nnsight::tracing
