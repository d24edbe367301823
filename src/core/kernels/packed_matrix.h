// PackedMatrix: a weight matrix kept in a ggml block-quantized encoding
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K), usually pointing straight
// into a memory-mapped GGUF file, for the packed linear kernel
// (packed_linear.h) and packed embedding lookups.
//
// Logical shape [rows, cols] in PyTorch order (a Linear weight [out, in]);
// each row is cols / block_size whole blocks. Logical row r lives at
//   data + (row_index.empty() ? r : row_index[r]) * row_stride
// so a row permutation (GGUF's q/k head layout) or a row slice (tensor
// parallelism) needs no copy; a column slice starting at a block boundary
// is a byte offset into every row.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nnsight::kernels {

// Values are ggml's type ids (enum ggml_type), so a GGUF type converts by value.
enum class PackedType : uint32_t {
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
};

struct PackedTypeTraits {
  const char* name;     // "Q4_1"
  int64_t block_size;   // elements per block: 32, or 256 for the K types
  int64_t block_bytes;  // bytes per block
};

// Whether a ggml type id is one of the packed types.
bool is_packed_type(uint32_t ggml_type_id);
const PackedTypeTraits& packed_traits(PackedType type);
// All eight packed types, in id order (for tests and benchmarks).
const std::vector<PackedType>& all_packed_types();

struct PackedMatrix {
  PackedType type = PackedType::Q8_0;
  int64_t rows = 0;
  int64_t cols = 0;  // a multiple of the type's block size
  const uint8_t* data = nullptr;
  int64_t row_stride = 0;          // bytes between consecutive physical rows
  std::vector<int64_t> row_index;  // [rows] physical row of each logical row; empty = identity
  // With a row_index: [rows] the logical rows in increasing physical order
  // (ties in logical order), so that a kernel can walk the memory forwards
  // (llama.cpp's q/k head permutation otherwise sends it back and forth and
  // the prefetchers lose the stream). Empty with no row_index.
  std::vector<int64_t> scan_order;
  std::shared_ptr<const void> owner;  // keeps `data` alive (the file mapping, or a buffer)

  const uint8_t* row(int64_t r) const { return data + (row_index.empty() ? r : row_index[r]) * row_stride; }
  // Bytes of one row's blocks (cols / block_size * block_bytes).
  int64_t row_bytes() const;
  // Bytes a pass over every row reads.
  int64_t bytes() const { return rows * row_bytes(); }

  // Logical rows [start, start + length), sharing the data.
  PackedMatrix narrow_rows(int64_t start, int64_t length) const;
  // Columns [start, start + length), both multiples of the block size, sharing the data.
  PackedMatrix narrow_cols(int64_t start, int64_t length) const;
  // Logical rows index[0], index[1], ... of this matrix (any number, repeats
  // allowed), sharing the data.
  PackedMatrix select_rows(const std::vector<int64_t>& index) const;

  // The logical row at position p of the scan order.
  int64_t scan_row(int64_t p) const { return scan_order.empty() ? p : scan_order[static_cast<size_t>(p)]; }
  // Sets scan_order from row_index.
  void update_scan_order();

  // float32 [rows, cols], decoded by the portable reference decoder.
  at::Tensor dequantize() const;
};

// Copies `rows` rows of `row_bytes` each into a fresh buffer owned by the
// result: for tests, and for packed tensors that do not come from a file.
PackedMatrix make_packed_matrix(PackedType type, int64_t rows, int64_t cols, const uint8_t* src);

// The portable reference decoder: `n` elements (whole blocks) of `type` at
// `src` to float32 `dst`. The vector decoders and the packed linear kernel
// reproduce these values bit for bit.
void decode_packed_reference(PackedType type, const uint8_t* src, float* dst, int64_t n);

}  // namespace nnsight::kernels
