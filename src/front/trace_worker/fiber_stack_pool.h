// FiberStackPool: guard-paged fiber stacks kept for reuse.
//
// Every traced request runs its mediators on fibers. Mapping a fresh
// protected stack per mediator costs an mmap, an mprotect, an munmap (whose
// TLB shootdown interrupts every thread of the process) and page faults on
// the pages the graph touches; at tens of microseconds that was most of a
// one-token trace's fixed cost. Stacks released by finished mediators go back
// to a small free list instead, guard page and touched pages intact.
#pragma once

#include <boost/context/stack_context.hpp>

#include "front/trace_worker/fiber_sanitizer.h"

#include <cstddef>

namespace nnsight::tracing {

class FiberStackPool {
 public:
  // The process-wide pool of stacks of `stack_bytes` (fixed at first use).
  static FiberStackPool& instance();

  explicit FiberStackPool(size_t stack_bytes, size_t max_cached);
  ~FiberStackPool();
  FiberStackPool(const FiberStackPool&) = delete;
  FiberStackPool& operator=(const FiberStackPool&) = delete;

  boost::context::stack_context take();
  void give_back(boost::context::stack_context& sc);

  size_t cached() const;
  size_t stack_bytes() const { return stack_bytes_; }

 private:
  struct State;
  State* state_;
  size_t stack_bytes_;
  size_t max_cached_;
};

// The StackAllocator boost::context::fiber is given: a handle to the pool
// (it is copied into every fiber's control block, so it stays small), and
// the fiber's FiberSanitizer (if any), told the stack it runs on.
class PooledProtectedStack {
 public:
  // `sanitizer` null: a fiber whose switches nobody annotates.
  explicit PooledProtectedStack(FiberStackPool& pool, FiberSanitizer* sanitizer = nullptr)
      : pool_(&pool), sanitizer_(sanitizer) {}
  boost::context::stack_context allocate() {
    boost::context::stack_context sc = pool_->take();
    if (sanitizer_) sanitizer_->set_stack(sc);
    return sc;
  }
  void deallocate(boost::context::stack_context& sc) noexcept { pool_->give_back(sc); }

 private:
  FiberStackPool* pool_;
  FiberSanitizer* sanitizer_;
};

}  // namespace nnsight::tracing
