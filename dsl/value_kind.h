// The kinds of value that flow through a graph, and sets of kinds (KindMask)
// that the validator uses as static types: a node's result is "one of these
// kinds", an op parameter accepts "one of these kinds".
#pragma once

#include <cstdint>
#include <string>

namespace nnsight::dsl {

// The order is the wire code in the binary encoding (see docs/ir.md) and the
// alternative index in Value's variant: append only.
enum class ValueKind : uint8_t {
  None = 0,
  Tensor = 1,
  Int = 2,     // int64
  Double = 3,  // float64
  Bool = 4,
  List = 5,   // list of values (any kinds)
  Tuple = 6,  // tuple of tensors, as modules return; an undefined tensor is None
  Index = 7,  // index spec: x[1, 2:-1, ..., None, mask]
  Dtype = 8,
  String = 9,
};
constexpr int kNumValueKinds = 10;

const char* kind_name(ValueKind k);

using KindMask = uint16_t;
constexpr KindMask mask_of(ValueKind k) { return static_cast<KindMask>(1u << static_cast<unsigned>(k)); }

namespace kinds {
constexpr KindMask None = mask_of(ValueKind::None);
constexpr KindMask Tensor = mask_of(ValueKind::Tensor);
constexpr KindMask Int = mask_of(ValueKind::Int);
constexpr KindMask Double = mask_of(ValueKind::Double);
constexpr KindMask Bool = mask_of(ValueKind::Bool);
constexpr KindMask List = mask_of(ValueKind::List);
constexpr KindMask Tuple = mask_of(ValueKind::Tuple);
constexpr KindMask Index = mask_of(ValueKind::Index);
constexpr KindMask Dtype = mask_of(ValueKind::Dtype);
constexpr KindMask String = mask_of(ValueKind::String);
constexpr KindMask Number = Int | Double | Bool;
constexpr KindMask TensorOrNumber = Tensor | Number;
constexpr KindMask Any = static_cast<KindMask>((1u << kNumValueKinds) - 1);
// Nothing: the node produces no value (set, save, control markers).
constexpr KindMask Nothing = 0;
}  // namespace kinds

// "tensor", "int or list", "any value", "nothing".
std::string describe_mask(KindMask m);

}  // namespace nnsight::dsl
