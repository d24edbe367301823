#include "core/hook_point.h"

namespace nnsight {

at::Tensor HookPoint::forward_sequence(const at::Tensor& x, int64_t token_start) {
  sequence_start_ = token_start;
  struct Reset {
    int64_t& v;
    ~Reset() { v = -1; }
  } reset{sequence_start_};
  return forward(x);
}

}  // namespace nnsight
