#include "core/kernels/packed_matrix.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/kernels/packed_decode.h"

namespace nnsight::kernels {

namespace {

constexpr PackedTypeTraits kQ4_0{"Q4_0", 32, 18};
constexpr PackedTypeTraits kQ4_1{"Q4_1", 32, 20};
constexpr PackedTypeTraits kQ5_0{"Q5_0", 32, 22};
constexpr PackedTypeTraits kQ5_1{"Q5_1", 32, 24};
constexpr PackedTypeTraits kQ8_0{"Q8_0", 32, 34};
constexpr PackedTypeTraits kQ4_K{"Q4_K", 256, 144};
constexpr PackedTypeTraits kQ5_K{"Q5_K", 256, 176};
constexpr PackedTypeTraits kQ6_K{"Q6_K", 256, 210};

}  // namespace

bool is_packed_type(uint32_t id) {
  switch (id) {
    case 2:
    case 3:
    case 6:
    case 7:
    case 8:
    case 12:
    case 13:
    case 14:
      return true;
    default:
      return false;
  }
}

const PackedTypeTraits& packed_traits(PackedType type) {
  switch (type) {
    case PackedType::Q4_0:
      return kQ4_0;
    case PackedType::Q4_1:
      return kQ4_1;
    case PackedType::Q5_0:
      return kQ5_0;
    case PackedType::Q5_1:
      return kQ5_1;
    case PackedType::Q8_0:
      return kQ8_0;
    case PackedType::Q4_K:
      return kQ4_K;
    case PackedType::Q5_K:
      return kQ5_K;
    case PackedType::Q6_K:
      return kQ6_K;
  }
  TORCH_CHECK(false, "packed_traits: unknown PackedType ", static_cast<uint32_t>(type));
}

const std::vector<PackedType>& all_packed_types() {
  static const std::vector<PackedType> all = {PackedType::Q4_0, PackedType::Q4_1, PackedType::Q5_0, PackedType::Q5_1,
                                              PackedType::Q8_0, PackedType::Q4_K, PackedType::Q5_K, PackedType::Q6_K};
  return all;
}

int64_t PackedMatrix::row_bytes() const {
  const PackedTypeTraits& t = packed_traits(type);
  return cols / t.block_size * t.block_bytes;
}

PackedMatrix PackedMatrix::narrow_rows(int64_t start, int64_t length) const {
  TORCH_CHECK(start >= 0 && length >= 0 && start + length <= rows, "PackedMatrix::narrow_rows: [", start, ", +", length,
              ") outside ", rows, " rows");
  PackedMatrix m = *this;
  m.rows = length;
  if (row_index.empty()) {
    m.data = data + start * row_stride;
  } else {
    m.row_index.assign(row_index.begin() + start, row_index.begin() + start + length);
    m.update_scan_order();
  }
  return m;
}

PackedMatrix PackedMatrix::narrow_cols(int64_t start, int64_t length) const {
  const PackedTypeTraits& t = packed_traits(type);
  TORCH_CHECK(
      start >= 0 && length >= 0 && start + length <= cols && start % t.block_size == 0 && length % t.block_size == 0,
      "PackedMatrix::narrow_cols: [", start, ", +", length, ") of ", cols, " columns is not whole ", t.name,
      " blocks of ", t.block_size);
  PackedMatrix m = *this;
  m.cols = length;
  m.data = data + start / t.block_size * t.block_bytes;
  return m;
}

PackedMatrix PackedMatrix::select_rows(const std::vector<int64_t>& index) const {
  std::vector<int64_t> physical(index.size());
  for (size_t r = 0; r < index.size(); ++r) {
    TORCH_CHECK(index[r] >= 0 && index[r] < rows, "PackedMatrix::select_rows: index ", index[r], " out of range");
    physical[r] = row_index.empty() ? index[r] : row_index[static_cast<size_t>(index[r])];
  }
  PackedMatrix m = *this;
  m.rows = static_cast<int64_t>(physical.size());
  m.row_index = std::move(physical);
  m.update_scan_order();
  return m;
}

void PackedMatrix::update_scan_order() {
  scan_order.clear();
  if (row_index.empty()) return;
  scan_order.resize(row_index.size());
  std::iota(scan_order.begin(), scan_order.end(), int64_t(0));
  std::stable_sort(scan_order.begin(), scan_order.end(), [&](int64_t a, int64_t b) {
    return row_index[static_cast<size_t>(a)] < row_index[static_cast<size_t>(b)];
  });
}

at::Tensor PackedMatrix::dequantize() const {
  at::Tensor out = at::empty({rows, cols}, at::TensorOptions().dtype(at::kFloat));  // [rows, cols]
  float* dst = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) decode_packed_reference(type, row(r), dst + r * cols, cols);
  return out;
}

PackedMatrix make_packed_matrix(PackedType type, int64_t rows, int64_t cols, const uint8_t* src) {
  const PackedTypeTraits& t = packed_traits(type);
  TORCH_CHECK(rows >= 0 && cols >= 0 && cols % t.block_size == 0, "make_packed_matrix: ", cols,
              " columns are not whole ", t.name, " blocks");
  PackedMatrix m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.row_stride = cols / t.block_size * t.block_bytes;
  auto buf = std::shared_ptr<uint8_t>(new uint8_t[static_cast<size_t>(rows * m.row_stride) + 1],
                                      std::default_delete<uint8_t[]>());
  if (rows * m.row_stride > 0) std::memcpy(buf.get(), src, static_cast<size_t>(rows * m.row_stride));
  m.data = buf.get();
  m.owner = std::move(buf);
  return m;
}

void decode_packed_reference(PackedType type, const uint8_t* src, float* dst, int64_t n) {
  const PackedTypeTraits& t = packed_traits(type);
  TORCH_CHECK(n % t.block_size == 0, "decode_packed_reference: ", n, " is not whole ", t.name, " blocks");
  const int64_t nblocks = n / t.block_size;
  switch (type) {
    case PackedType::Q4_0:
      return detail::decode_q4_0(src, dst, nblocks);
    case PackedType::Q4_1:
      return detail::decode_q4_1(src, dst, nblocks);
    case PackedType::Q5_0:
      return detail::decode_q5_0(src, dst, nblocks);
    case PackedType::Q5_1:
      return detail::decode_q5_1(src, dst, nblocks);
    case PackedType::Q8_0:
      return detail::decode_q8_0(src, dst, nblocks);
    case PackedType::Q4_K:
      return detail::decode_q4_k(src, dst, nblocks);
    case PackedType::Q5_K:
      return detail::decode_q5_k(src, dst, nblocks);
    case PackedType::Q6_K:
      return detail::decode_q6_k(src, dst, nblocks);
  }
}

}  // namespace nnsight::kernels
