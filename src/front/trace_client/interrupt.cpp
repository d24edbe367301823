#include "front/trace_client/interrupt.h"

#include <atomic>

#include <nnsight/interrupt.hpp>

namespace nnsight {
namespace {
// Lock-free (checked below), so incrementing it is safe in a signal handler.
std::atomic<uint64_t> g_interrupts{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "request_interrupt must be async-signal-safe");
}  // namespace

void request_interrupt() noexcept { g_interrupts.fetch_add(1, std::memory_order_relaxed); }

namespace tracing {
uint64_t interrupt_count() noexcept { return g_interrupts.load(std::memory_order_relaxed); }
}  // namespace tracing

}  // namespace nnsight

extern "C" void nnsight_request_interrupt(void) { nnsight::request_interrupt(); }
