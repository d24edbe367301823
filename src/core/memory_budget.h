// MemoryBudget: a bound on the CPU memory that code running on behalf of one
// party (one request's intervention) may hold at once.
//
// While a ScopedMemoryBudget is alive on a thread, every CPU tensor
// allocation on that thread is checked against the budget *before* the
// memory is taken: an op that would produce a 9 GB tensor fails at once
// with MemoryBudgetExceeded instead of paging the machine to death. Memory
// allocated under a budget counts until it is freed, wherever that happens.
//
// How: LibTorch's CPU allocator is wrapped once (install_budget_allocator).
// A thread with no budget pays one thread-local load per allocation.
// CUDA allocations are not covered (docs/errors.md says so).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace nnsight {

class MemoryBudgetExceeded : public std::runtime_error {
 public:
  MemoryBudgetExceeded(int64_t requested, int64_t held, int64_t limit);
  int64_t requested() const { return requested_; }
  int64_t held() const { return held_; }
  int64_t limit() const { return limit_; }

 private:
  int64_t requested_, held_, limit_;
};

class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}
  int64_t limit() const { return limit_; }
  int64_t held() const { return held_.load(std::memory_order_relaxed); }
  // Counts `bytes` against the budget, or throws MemoryBudgetExceeded (counting nothing).
  void reserve(int64_t bytes);
  void release(int64_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

 private:
  int64_t limit_;
  std::atomic<int64_t> held_{0};
};

// Makes `budget` (may be null: none) the calling thread's budget for its lifetime.
class ScopedMemoryBudget {
 public:
  explicit ScopedMemoryBudget(const std::shared_ptr<MemoryBudget>& budget);
  ~ScopedMemoryBudget();
  ScopedMemoryBudget(const ScopedMemoryBudget&) = delete;
  ScopedMemoryBudget& operator=(const ScopedMemoryBudget&) = delete;

 private:
  std::shared_ptr<MemoryBudget>* previous_;
  std::shared_ptr<MemoryBudget> current_;
};

// Wraps LibTorch's CPU allocator (once per process; later calls do nothing).
void install_budget_allocator();

// A default budget for one request's intervention on this machine: a
// sixteenth of physical memory, between 256 MiB and 1.5 GiB.
int64_t default_intervention_budget_bytes();

// "1.5 GiB", "12.0 MiB", "300 B".
std::string format_bytes(int64_t bytes);

}  // namespace nnsight
