// Static kinds: what the validator (and the builder, at the user's line)
// knows about a node's value before anything runs, and the argument check of
// an op call against its signature.
#pragma once

#include "dsl/node.h"
#include "dsl/ops/registry.h"
#include "dsl/value_kind.h"

#include <string>

namespace nnsight::dsl {

// The kind of a constant.
inline KindMask kind_of(const Value& v) { return mask_of(v.kind()); }

// Empty when args (static kinds of the n arguments) fit op's signature;
// otherwise a message such as "takes 2 to 3 arguments, got 1" or
// "argument 1 ('dim') must be int, but node 4 is tensor".
std::string check_op_call(const OpDef& op, const KindMask* args, const NodeId* arg_nodes, size_t n);

}  // namespace nnsight::dsl
