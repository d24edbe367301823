#include "front/trace_worker/trace_group.h"

#include <algorithm>

#include <nnsight/error.hpp>

#include "core/memory_budget.h"
#include "dsl/errors.h"

namespace nnsight::tracing {

Mediator& TraceGroup::add(std::unique_ptr<Mediator> m) {
  auto rank = [](const Mediator& x) { return std::make_pair(x.invoke(), static_cast<int>(x.role())); };
  auto pos = std::upper_bound(
      mediators_.begin(), mediators_.end(), m,
      [&](const std::unique_ptr<Mediator>& a, const std::unique_ptr<Mediator>& b) { return rank(*a) < rank(*b); });
  return **mediators_.insert(pos, std::move(m));
}

void TraceGroup::count_saved(int64_t delta, const std::string& name) {
  if (max_saved_bytes > 0 && delta > 0 && saved_bytes_ + delta > max_saved_bytes)
    throw Error("saved bytes limit: saving '" + name + "' would make this trace's saves " +
                format_bytes(saved_bytes_ + delta) + " (" + std::to_string(saved_bytes_ + delta) +
                " bytes); the limit is " + format_bytes(max_saved_bytes) + " (" + std::to_string(max_saved_bytes) +
                " bytes, the server's --max-saved-mb)");
  saved_bytes_ += delta;
}

void TraceGroup::remove_mediators_of(uint64_t request_id) {
  mediators_.erase(std::remove_if(mediators_.begin(), mediators_.end(),
                                  [&](const std::unique_ptr<Mediator>& m) { return m->request_id() == request_id; }),
                   mediators_.end());
}

std::vector<uint64_t> TraceGroup::requests_of(const Mediator& m) const {
  if (m.role() == GraphRole::kPromptless) return requests_;
  std::vector<uint64_t> out{m.request_id()};
  const auto own = std::find(requests_.begin(), requests_.end(), m.request_id());
  if (own == requests_.end()) return out;
  const uint32_t invoke = invoke_of_[static_cast<size_t>(own - requests_.begin())];
  for (size_t i = 0; i < requests_.size(); ++i)
    if (!has_graphs_[i] && invoke_of_[i] == invoke) out.push_back(requests_[i]);
  return out;
}

dsl::Value TraceGroup::external(uint32_t invoke, dsl::NodeId node) const {
  for (const auto& m : mediators_) {
    if (m->invoke() != invoke || m->role() == GraphRole::kAuxiliary) continue;
    if (!m->evaluator().has_value(node))
      throw dsl::ValueNeverProvided("invoke " + std::to_string(invoke) + " has not computed node " +
                                    std::to_string(node) + " (yet) at this point of the model");
    return m->evaluator().value(node);
  }
  throw dsl::ValueNeverProvided("invoke " + std::to_string(invoke) + " is not running (it ended or failed)");
}

}  // namespace nnsight::tracing
