#include "dsl/ops/index_spec.h"

#include <nnsight/error.hpp>

namespace nnsight::dsl {
namespace {

at::indexing::TensorIndex item_index(const IndexItem& it) {
  using namespace at::indexing;
  switch (it.kind) {
    case IndexItem::Kind::Int:
      return TensorIndex(it.integer);
    case IndexItem::Kind::Slice: {
      if (it.step <= 0) throw Error("slice step must be positive, got " + std::to_string(it.step));
      c10::optional<int64_t> start, stop;
      if (it.start) start = *it.start;
      if (it.stop) stop = *it.stop;
      return TensorIndex(Slice(start, stop, it.step));
    }
    case IndexItem::Kind::Ellipsis:
      return TensorIndex(Ellipsis);
    case IndexItem::Kind::None:
      return TensorIndex(None);
    case IndexItem::Kind::Tensor:
      return TensorIndex(it.tensor);
  }
  throw Error("bad index item");
}

void append(std::vector<at::indexing::TensorIndex>& out, const Value& v, bool allow_list) {
  switch (v.kind()) {
    case ValueKind::Index:
      for (const IndexItem& it : v.as_index()) out.push_back(item_index(it));
      return;
    case ValueKind::Int:
      out.emplace_back(v.as_int());
      return;
    case ValueKind::None:
      out.emplace_back(at::indexing::None);
      return;
    case ValueKind::Tensor:
      out.emplace_back(v.as_tensor());
      return;
    case ValueKind::List:
      if (allow_list) {
        for (const Value& x : v.as_list()) append(out, x, false);
        return;
      }
      break;
    default:
      break;
  }
  throw Error("not an index: " + v.describe());
}

}  // namespace

std::vector<at::indexing::TensorIndex> to_tensor_indices(const Value& index) {
  std::vector<at::indexing::TensorIndex> out;
  append(out, index, true);
  return out;
}

}  // namespace nnsight::dsl
