// The thread that finishes traces: a trace's outputs arrive on the engine's
// loop thread, and turning them into a TraceResult moves every save to the
// host (a device-to-host copy per tensor on a GPU). That work runs here, in
// submission order, so one large save never stalls the loop and the other
// requests' steps.
#pragma once

#include <functional>

namespace nnsight::tracing {

// Runs `job` on the process's result thread (started on first use; jobs run
// one at a time, in the order given). A job's exceptions are its own to
// catch.
void run_on_result_thread(std::function<void()> job);

}  // namespace nnsight::tracing
