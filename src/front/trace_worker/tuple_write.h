// A write of a whole tuple value (`envoy.output() = make_tuple(...)`): the
// elements to write, checked against the model's tuple. The interleaver and
// scan (which reports the same errors without running the model) share it.
#pragma once

#include <cstddef>
#include <vector>

#include "core/provider_key.h"
#include "dsl/value.h"

namespace nnsight::tracing {

// `value`'s elements (a tuple or a list; None elements are left as they
// are). Throws nnsight::Error naming `key` for any other value or a count
// other than `tuple_size`.
std::vector<dsl::Value> tuple_write_items(const ProviderKey& key, const dsl::Value& value, size_t tuple_size);

}  // namespace nnsight::tracing
