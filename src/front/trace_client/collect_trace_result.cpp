#include "front/trace_client/collect_trace_result.h"

#include <map>
#include <string>

#include <nnsight/error.hpp>

namespace nnsight::tracing {

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
