// Limits: how big a graph may be. Decoders check every size against these
// before allocating, and the validator checks graphs built in memory against
// the same numbers, so hostile input costs at most what the limits allow.
#pragma once

#include <cstdint>

namespace nnsight::dsl {

struct Limits {
  uint64_t max_nodes = 100'000;                // nodes in one graph
  uint64_t max_constant_bytes = 256ull << 20;  // tensor data in all constants of a graph
  uint64_t max_tensor_elements = 1ull << 26;   // elements of one constant tensor
  uint64_t max_tensor_rank = 16;               // dimensions of one constant tensor
  uint64_t max_depth = 64;                     // nested blocks, and nested lists in a value
  uint64_t max_encoded_bytes = 512ull << 20;   // size of an encoded graph (binary or JSON)
  uint64_t max_string_length = 1ull << 16;     // any string: key, op, save name, file
  uint64_t max_list_length = 1ull << 20;       // list/tuple/index items, op arguments
  int64_t max_steps = 1ll << 20;               // largest step number and Iter range a graph may name

  Limits& nodes(uint64_t v) {
    max_nodes = v;
    return *this;
  }
  Limits& constant_bytes(uint64_t v) {
    max_constant_bytes = v;
    return *this;
  }
  Limits& tensor_elements(uint64_t v) {
    max_tensor_elements = v;
    return *this;
  }
  Limits& tensor_rank(uint64_t v) {
    max_tensor_rank = v;
    return *this;
  }
  Limits& depth(uint64_t v) {
    max_depth = v;
    return *this;
  }
  Limits& encoded_bytes(uint64_t v) {
    max_encoded_bytes = v;
    return *this;
  }
  Limits& string_length(uint64_t v) {
    max_string_length = v;
    return *this;
  }
  Limits& list_length(uint64_t v) {
    max_list_length = v;
    return *this;
  }
  Limits& steps(int64_t v) {
    max_steps = v;
    return *this;
  }
};

}  // namespace nnsight::dsl
