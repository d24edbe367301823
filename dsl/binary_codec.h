// The compact binary form of a graph, for transport (cereal portable binary,
// little endian):
//
//   "NNSG"  u16 format version  | cereal payload: u8 endianness flag (1),
//   u32 invoke, u64 file count, files (u64 length + bytes), u64 node count,
//   nodes (u8 kind, u32 file index, u32 line, kind-specific fields)
//
// The full layout is in docs/ir.md. Decoding checks every count and length
// against the remaining input and the Limits before allocating, so hostile
// bytes are rejected with a DecodeError naming the byte offset and node.
// Encoding is canonical: a graph has exactly one encoding (file names are
// tabled in order of first use, NaN doubles are written as the one quiet NaN).
#pragma once

#include "dsl/graph.h"
#include "dsl/limits.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace nnsight::dsl {

inline constexpr char kGraphMagic[4] = {'N', 'N', 'S', 'G'};
inline constexpr uint16_t kGraphFormatVersion = 1;

// The encoded bytes.
std::string encode_binary(const Graph& g);
// Appends the encoding to `out` (reuse one buffer to avoid reallocation).
void encode_binary(const Graph& g, std::string& out);
// Bytes encode_binary would produce, without producing them.
uint64_t encoded_size(const Graph& g);

// Throws DecodeError for anything but one complete, well-formed graph within
// the limits. Does not validate the graph's meaning (see validate.h).
Graph decode_binary(std::string_view bytes, const Limits& limits = Limits());

}  // namespace nnsight::dsl
