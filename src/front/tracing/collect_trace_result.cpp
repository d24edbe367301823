#include "front/tracing/collect_trace_result.h"

#include <chrono>
#include <map>
#include <string>

#include <nnsight/error.hpp>
#include <nnsight/interrupt.hpp>

#include "front/tracing/interrupt.h"

namespace nnsight::tracing {

namespace {
// Waits until every request has finished. Polls the interrupt counter (a
// signal handler can only bump a counter). On an interrupt since the trace was
// submitted, aborts the requests still running, waits for them to finish (the
// engine reports an aborted request at its next step), and throws Interrupted.
void wait_all(runner::AsyncEngine& engine, const std::vector<runner::RequestHandle>& handles, uint64_t submitted_at) {
  auto interrupted = [&] {
    if (interrupt_count() == submitted_at) return false;
    for (const auto& a : handles)
      if (a.result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) engine.abort(a.id);
    for (const auto& a : handles) a.result.wait();
    return true;
  };
  for (const auto& h : handles)
    while (h.result.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready)
      if (interrupted()) throw Interrupted("the trace was interrupted; its requests were aborted");
  // Finished, but interrupted before it was collected: the caller asked to stop.
  if (interrupted()) throw Interrupted("the trace was interrupted; its requests were aborted");
}
}  // namespace

TraceResult collect_trace_result(runner::AsyncEngine& engine, const std::vector<runner::RequestHandle>& handles,
                                 uint64_t submitted_at) {
  wait_all(engine, handles, submitted_at);
  std::vector<RequestOutput> outs;
  for (const auto& h : handles) outs.push_back(h.result.get());
  return collect_trace_result(std::move(outs));
}

TraceResult collect_trace_result(std::vector<RequestOutput> outs) {
  for (const auto& o : outs)
    if (!o.error.empty()) throw TraceError(o.error);
  std::map<std::string, SavedValue> saves;
  for (auto& o : outs) {
    for (auto& [name, v] : o.saves) {
      SavedValue cpu = v;
      if (cpu.tensor.defined()) cpu.tensor = cpu.tensor.cpu();
      for (auto& t : cpu.list)
        if (t.defined()) t = t.cpu();
      saves[name] = std::move(cpu);
    }
    o.saves.clear();
  }
  return TraceResult(std::move(outs), std::move(saves));
}

}  // namespace nnsight::tracing
