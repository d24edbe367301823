#include "dsl/provider_key.h"

namespace nnsight::dsl {

KindMask provider_key_kinds(KeyKind kind) {
  switch (kind) {
    case KeyKind::ModuleOutput:
      return kinds::Tensor | kinds::Tuple;
    case KeyKind::ModuleInput:
    case KeyKind::ModuleSkip:
      return kinds::Tensor;
    case KeyKind::ModuleInputs:
      return kinds::Tuple;
    case KeyKind::Logits:
    case KeyKind::Samples:
      return kinds::Tensor;
    case KeyKind::Result:
      return kinds::Any;
  }
  return kinds::Any;
}

}  // namespace nnsight::dsl
