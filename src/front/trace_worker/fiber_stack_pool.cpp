#include "front/trace_worker/fiber_stack_pool.h"

#include <boost/context/protected_fixedsize_stack.hpp>

#include <mutex>
#include <vector>

#if defined(NNSIGHT_SANITIZE_ADDRESS)
#include <sanitizer/asan_interface.h>
#endif

namespace nnsight::tracing {

namespace {
// Ops inside a graph call into LibTorch and BLAS, which can use deep stacks;
// pages are committed only when touched, so a generous size costs little.
constexpr size_t kFiberStackBytes = size_t(4) << 20;
// Enough for the mediators of a few hundred concurrent requests to recycle
// without a new mapping; beyond it stacks are unmapped as before.
constexpr size_t kMaxCachedStacks = 256;
}  // namespace

struct FiberStackPool::State {
  mutable std::mutex mu;
  std::vector<boost::context::stack_context> free;
};

FiberStackPool& FiberStackPool::instance() {
  // Leaked on purpose: fibers may be unwound during static destruction.
  static FiberStackPool* pool = new FiberStackPool(kFiberStackBytes, kMaxCachedStacks);
  return *pool;
}

FiberStackPool::FiberStackPool(size_t stack_bytes, size_t max_cached)
    : state_(new State), stack_bytes_(stack_bytes), max_cached_(max_cached) {}

FiberStackPool::~FiberStackPool() {
  boost::context::protected_fixedsize_stack alloc(stack_bytes_);
  for (auto& sc : state_->free) alloc.deallocate(sc);
  delete state_;
}

boost::context::stack_context FiberStackPool::take() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->free.empty()) {
      boost::context::stack_context sc = state_->free.back();
      state_->free.pop_back();
#if defined(NNSIGHT_SANITIZE_ADDRESS)
      // A fiber unwound for good may leave its frames' redzones poisoned.
      __asan_unpoison_memory_region(static_cast<char*>(sc.sp) - sc.size, sc.size);
#endif
      return sc;
    }
  }
  return boost::context::protected_fixedsize_stack(stack_bytes_).allocate();
}

void FiberStackPool::give_back(boost::context::stack_context& sc) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->free.size() < max_cached_) {
      state_->free.push_back(sc);
      return;
    }
  }
  boost::context::protected_fixedsize_stack(stack_bytes_).deallocate(sc);
}

size_t FiberStackPool::cached() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->free.size();
}

}  // namespace nnsight::tracing
