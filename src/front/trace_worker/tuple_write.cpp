#include "front/trace_worker/tuple_write.h"

#include <string>

#include <nnsight/error.hpp>

namespace nnsight::tracing {

std::vector<dsl::Value> tuple_write_items(const ProviderKey& key, const dsl::Value& value, size_t tuple_size) {
  std::vector<dsl::Value> items;
  if (value.kind() == dsl::ValueKind::Tuple) {
    for (const auto& t : value.as_tuple()) items.emplace_back(t);
  } else if (value.kind() == dsl::ValueKind::List) {
    items = value.as_list();
  } else {
    throw Error("cannot set `" + key.str() + "`, a tuple of " + std::to_string(tuple_size) + ", to " +
                value.describe() + " (build the tuple with make_tuple, or write into its elements)");
  }
  if (items.size() != tuple_size)
    throw Error("cannot set `" + key.str() + "`: the model's tuple has " + std::to_string(tuple_size) +
                " elements, the value has " + std::to_string(items.size()));
  return items;
}

}  // namespace nnsight::tracing
