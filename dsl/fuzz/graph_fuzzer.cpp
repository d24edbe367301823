// libFuzzer target over the graph decoders and the validator.
//
// Each input is decoded as binary and, when it looks like JSON, as JSON.
// Decoding may only fail with DecodeError and validation with
// ValidationError; anything else escaping (or a sanitizer report) is a
// finding. A graph that decodes must also satisfy the codec invariants:
// encode(decode(encode(g))) == encode(g), and the JSON form of g reads back
// to the same bytes.
#include "dsl/binary_codec.h"
#include "dsl/errors.h"
#include "dsl/json_codec.h"
#include "dsl/validate.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using namespace nnsight::dsl;

[[noreturn]] void invariant_broken(const char* what) {
  std::fprintf(stderr, "graph_fuzzer: codec invariant broken: %s\n", what);
  std::abort();
}

// Small enough that every iteration stays fast; the logic is the same as
// with the defaults.
const Limits& fuzz_limits() {
  static const Limits l =
      Limits().nodes(4096).constant_bytes(1u << 20).tensor_elements(1u << 18).encoded_bytes(1u << 20).list_length(
          1u << 14);
  return l;
}

void check(const Graph& g) {
  std::string b1 = encode_binary(g);
  Graph g2 = decode_binary(b1, fuzz_limits());  // must not throw: we wrote it
  std::string b2 = encode_binary(g2);
  if (b1 != b2) invariant_broken("binary re-encoding differs");
  Graph g3 = from_json(to_json(g2), fuzz_limits());
  if (encode_binary(g3) != b1) invariant_broken("binary -> JSON -> binary differs");
  try {
    validate(g2, ValidateOptions().with_limits(fuzz_limits()));
  } catch (const ValidationError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    check(decode_binary(in, fuzz_limits()));
  } catch (const DecodeError&) {
  }
  size_t first = in.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && in[first] == '{') {
    try {
      check(from_json(in, fuzz_limits()));
    } catch (const DecodeError&) {
    }
  }
  return 0;
}
