#include "core/kernels/env_switch.h"

#include <cstdlib>
#include <cstring>

namespace nnsight::kernels {

bool EnvSwitch::on() {
  int use = state_.load(std::memory_order_relaxed);
  if (use < 0) {
    const char* env = std::getenv(env_);
    use = env != nullptr && std::strcmp(env, "0") == 0 ? 0 : 1;
    int expected = -1;
    state_.compare_exchange_strong(expected, use);
    use = state_.load(std::memory_order_relaxed);
  }
  return use == 1;
}

int EnvSwitch::set(bool on) {
  this->on();  // the environment decides first, so restore() brings its choice back
  return state_.exchange(on ? 1 : 0);
}

}  // namespace nnsight::kernels
