// The interrupt counter behind nnsight::request_interrupt()
// (include/nnsight/interrupt.hpp). A waiting trace remembers the counter when
// it starts waiting and stops when the counter has moved.
#pragma once

#include <cstdint>

namespace nnsight::tracing {

uint64_t interrupt_count() noexcept;

}  // namespace nnsight::tracing
