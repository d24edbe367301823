// FiberSanitizer: tells AddressSanitizer and ThreadSanitizer when a
// Mediator's fiber switches stacks. Without it ASan takes the fiber's frames
// for the thread's (false stack-buffer-overflow and use-after-return reports,
// stale poison on reused stacks) and TSan mixes the two contexts' histories.
// In builds without NNSIGHT_SANITIZE (cmake/nnsightSanitizers.cmake) every
// call is empty and inlined away.
//
// The protocol (both sanitizers' documented one): the side about to jump
// calls a start (ASan: with the target stack's bounds; TSan: the switch
// itself), the side that lands calls a finish (ASan only, which also learns
// the stack it came from). A fiber that ends says so in its last start.
#pragma once

#include <boost/context/stack_context.hpp>

#include <cstddef>

#if defined(NNSIGHT_SANITIZE_ADDRESS)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(NNSIGHT_SANITIZE_THREAD)
#include <sanitizer/tsan_interface.h>
#endif

namespace nnsight::tracing {

class FiberSanitizer {
 public:
  FiberSanitizer() = default;
  FiberSanitizer(const FiberSanitizer&) = delete;
  FiberSanitizer& operator=(const FiberSanitizer&) = delete;
  ~FiberSanitizer() {
#if defined(NNSIGHT_SANITIZE_THREAD)
    if (fiber_tsan_) __tsan_destroy_fiber(fiber_tsan_);
#endif
  }

  // The fiber's stack, once allocated (before the first enter()).
  void set_stack(const boost::context::stack_context& sc) {
    fiber_bottom_ = static_cast<const char*>(sc.sp) - sc.size;
    fiber_size_ = sc.size;
#if defined(NNSIGHT_SANITIZE_THREAD)
    if (!fiber_tsan_) fiber_tsan_ = __tsan_create_fiber(0);
#endif
  }

  // ---- on the caller's side, around each resume of the fiber
  void enter() {
#if defined(NNSIGHT_SANITIZE_ADDRESS)
    __sanitizer_start_switch_fiber(&caller_fake_stack_, fiber_bottom_, fiber_size_);
#endif
#if defined(NNSIGHT_SANITIZE_THREAD)
    caller_tsan_ = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(fiber_tsan_, 0);
#endif
  }
  void back_in_caller() {
#if defined(NNSIGHT_SANITIZE_ADDRESS)
    __sanitizer_finish_switch_fiber(caller_fake_stack_, nullptr, nullptr);
#endif
  }

  // ---- inside the fiber
  // First thing the fiber runs, and after each suspension returns.
  void landed_in_fiber() {
#if defined(NNSIGHT_SANITIZE_ADDRESS)
    __sanitizer_finish_switch_fiber(fiber_fake_stack_, &caller_bottom_, &caller_size_);
#endif
  }
  // Before the fiber suspends (`ending`: before it returns or unwinds for good).
  void leave(bool ending) {
#if defined(NNSIGHT_SANITIZE_ADDRESS)
    __sanitizer_start_switch_fiber(ending ? nullptr : &fiber_fake_stack_, caller_bottom_, caller_size_);
#endif
#if defined(NNSIGHT_SANITIZE_THREAD)
    __tsan_switch_to_fiber(caller_tsan_, 0);
#endif
    (void)ending;
  }

 private:
  // Unused (but kept, for one layout) in builds without sanitizers.
  [[maybe_unused]] const void* fiber_bottom_ = nullptr;
  [[maybe_unused]] size_t fiber_size_ = 0;
  [[maybe_unused]] const void* caller_bottom_ = nullptr;
  [[maybe_unused]] size_t caller_size_ = 0;
  [[maybe_unused]] void* caller_fake_stack_ = nullptr;
  [[maybe_unused]] void* fiber_fake_stack_ = nullptr;
  [[maybe_unused]] void* fiber_tsan_ = nullptr;
  [[maybe_unused]] void* caller_tsan_ = nullptr;
};

}  // namespace nnsight::tracing
