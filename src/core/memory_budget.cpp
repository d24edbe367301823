#include "core/memory_budget.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/csrc/api/include/torch/version.h>
#include <unistd.h>

#include <cstring>

#include <algorithm>
#include <cstdio>
#include <mutex>

namespace nnsight {

namespace {

thread_local std::shared_ptr<MemoryBudget>* tls_budget = nullptr;

// What a budgeted allocation keeps: the wrapped allocation and whom to credit.
struct BudgetedContext {
  c10::DataPtr inner;
  std::shared_ptr<MemoryBudget> budget;
  int64_t bytes;
};

void delete_budgeted(void* ctx) {
  auto* c = static_cast<BudgetedContext*>(ctx);
  c->budget->release(c->bytes);
  delete c;  // frees `inner` through its own deleter
}

class BudgetAllocator final : public c10::Allocator {
 public:
  explicit BudgetAllocator(c10::Allocator* base) : base_(base) {}

// LibTorch 2.3 made allocate() non-const and added copy_data().
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  c10::DataPtr allocate(size_t n) override { return allocate_impl(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
#else
  c10::DataPtr allocate(size_t n) const override { return allocate_impl(n); }
#endif

 private:
  c10::DataPtr allocate_impl(size_t n) const {
    std::shared_ptr<MemoryBudget>* b = tls_budget;
    if (b == nullptr || !*b || n == 0) return base_->allocate(n);
    const auto bytes = static_cast<int64_t>(n);
    (*b)->reserve(bytes);  // throws before anything is taken
    c10::DataPtr inner;
    try {
      inner = base_->allocate(n);
    } catch (...) {
      (*b)->release(bytes);
      throw;
    }
    void* data = inner.get();
    const c10::Device device = inner.device();
    auto* ctx = new BudgetedContext{std::move(inner), *b, bytes};
    return c10::DataPtr(data, ctx, &delete_budgeted, device);
  }

 public:
  // Raw allocations (rare on the CPU) bypass the budget: their deleter must be the base's.
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }

 private:
  c10::Allocator* base_;
};

}  // namespace

MemoryBudgetExceeded::MemoryBudgetExceeded(int64_t requested, int64_t held, int64_t limit)
    : std::runtime_error("memory budget exceeded: this allocation needs " + format_bytes(requested) + " while " +
                         format_bytes(held) + " are held, and the request's budget is " + format_bytes(limit) +
                         " (EngineArgs::intervention_memory_mb)"),
      requested_(requested),
      held_(held),
      limit_(limit) {}

void MemoryBudget::reserve(int64_t bytes) {
  int64_t held = held_.load(std::memory_order_relaxed);
  do {
    if (held + bytes > limit_) throw MemoryBudgetExceeded(bytes, held, limit_);
  } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
}

ScopedMemoryBudget::ScopedMemoryBudget(const std::shared_ptr<MemoryBudget>& budget)
    : previous_(tls_budget), current_(budget) {
  tls_budget = &current_;
}

ScopedMemoryBudget::~ScopedMemoryBudget() { tls_budget = previous_; }

void install_budget_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: tensors freed during static destruction still use it.
    static auto* wrapper = new BudgetAllocator(c10::GetCPUAllocator());
    // Priority above the default CPU allocator's (0), so a later default registration does not undo it.
    c10::SetCPUAllocator(wrapper, /*priority=*/1);
  });
}

int64_t default_intervention_budget_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  const int64_t phys = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : (int64_t{8} << 30);
  return std::clamp<int64_t>(phys / 16, int64_t{256} << 20, int64_t{3} << 29);
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1 << 30));
  else if (bytes >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

}  // namespace nnsight
