#include "core/kernels/kernel_path.h"

#include <atomic>

namespace nnsight::kernels {
namespace {
std::atomic<bool> g_forced{false};
}  // namespace

bool device_path_forced() { return g_forced.load(std::memory_order_relaxed); }

bool cpu_kernels_for(const at::Tensor& t) { return t.device().is_cpu() && !device_path_forced(); }

ForceDevicePath::ForceDevicePath() : before_(g_forced.exchange(true)) {}

ForceDevicePath::~ForceDevicePath() { g_forced.store(before_); }

}  // namespace nnsight::kernels
