#include "dsl/static_kinds.h"

#include <cstdint>

namespace nnsight::dsl {

std::string check_op_call(const OpDef& op, const KindMask* args, const NodeId* arg_nodes, size_t n) {
  size_t lo = op.min_args(), hi = op.max_args();
  if (n < lo || n > hi) {
    std::string range = hi == SIZE_MAX ? "at least " + std::to_string(lo)
                        : lo == hi     ? std::to_string(lo)
                                       : std::to_string(lo) + " to " + std::to_string(hi);
    return "'" + op.name + "' takes " + range + " argument" + (hi == 1 && lo == 1 ? "" : "s") + ", got " +
           std::to_string(n) + " (signature " + op.signature() + ")";
  }
  for (size_t i = 0; i < n; ++i) {
    const OpParam& p = op.param(i);
    if (!(args[i] & p.kinds)) {
      return "argument " + std::to_string(i) + " ('" + p.name + "') of '" + op.name + "' must be " +
             describe_mask(p.kinds) + ", but node " + std::to_string(arg_nodes[i]) + " is " + describe_mask(args[i]);
    }
  }
  return {};
}

}  // namespace nnsight::dsl
