#include "dsl/value_kind.h"

namespace nnsight::dsl {

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::None:
      return "none";
    case ValueKind::Tensor:
      return "tensor";
    case ValueKind::Int:
      return "int";
    case ValueKind::Double:
      return "double";
    case ValueKind::Bool:
      return "bool";
    case ValueKind::List:
      return "list";
    case ValueKind::Tuple:
      return "tuple";
    case ValueKind::Index:
      return "index";
    case ValueKind::Dtype:
      return "dtype";
    case ValueKind::String:
      return "string";
  }
  return "?";
}

std::string describe_mask(KindMask m) {
  if (m == kinds::Nothing) return "nothing";
  if (m == kinds::Any) return "any value";
  std::string out;
  bool number = (m & kinds::Number) == kinds::Number;  // int, double and bool read as "number"
  for (int k = 0; k < kNumValueKinds; ++k) {
    if (!(m & (1u << k))) continue;
    auto kind = static_cast<ValueKind>(k);
    if (number && (kind == ValueKind::Double || kind == ValueKind::Bool)) continue;
    if (!out.empty()) out += " or ";
    out += number && kind == ValueKind::Int ? "number" : kind_name(kind);
  }
  return out;
}

}  // namespace nnsight::dsl
