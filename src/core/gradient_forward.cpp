#include "core/gradient_forward.h"

namespace nnsight {

namespace {
thread_local bool g_active = false;
}

GradientForward::GradientForward() : previous_(g_active) { g_active = true; }
GradientForward::~GradientForward() { g_active = previous_; }
bool GradientForward::active() { return g_active; }

}  // namespace nnsight
