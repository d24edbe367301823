#include "core/gguf/dequantize.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstring>

#include <nnsight/error.hpp>

#include "core/kernels/packed_decode.h"

namespace nnsight {
namespace {

using kernels::detail::half_to_float;
using kernels::detail::load_u16;

// Each decoder handles `nblocks` whole blocks.

void decode_f32(const uint8_t* src, float* dst, int64_t nblocks) {
  std::memcpy(dst, src, static_cast<size_t>(nblocks) * 4);
}

void decode_f16(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t i = 0; i < nblocks; ++i) dst[i] = half_to_float(src + 2 * i);
}

void decode_bf16(const uint8_t* src, float* dst, int64_t nblocks) {
  for (int64_t i = 0; i < nblocks; ++i) {
    uint32_t bits = static_cast<uint32_t>(load_u16(src + 2 * i)) << 16;  // bf16 = high half of f32
    std::memcpy(dst + i, &bits, 4);
  }
}

// The block-quantized types decode with the packed kernels' reference
// decoders (core/kernels/packed_decode.h), so dequantized and packed weights
// hold the same floats.

using Decoder = void (*)(const uint8_t*, float*, int64_t);

Decoder decoder_for(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return decode_f32;
    case GgmlType::F16:
      return decode_f16;
    case GgmlType::BF16:
      return decode_bf16;
    case GgmlType::Q4_0:
      return kernels::detail::decode_q4_0;
    case GgmlType::Q4_1:
      return kernels::detail::decode_q4_1;
    case GgmlType::Q5_0:
      return kernels::detail::decode_q5_0;
    case GgmlType::Q5_1:
      return kernels::detail::decode_q5_1;
    case GgmlType::Q8_0:
      return kernels::detail::decode_q8_0;
    case GgmlType::Q4_K:
      return kernels::detail::decode_q4_k;
    case GgmlType::Q5_K:
      return kernels::detail::decode_q5_k;
    case GgmlType::Q6_K:
      return kernels::detail::decode_q6_k;
    default:
      return nullptr;
  }
}

Decoder checked_decoder(GgmlType type, const std::string& what) {
  Decoder dec = decoder_for(type);
  if (dec == nullptr) {
    throw LoadError(what + ": ggml type " + ggml_type_name(type) +
                    " cannot be dequantized (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, "
                    "Q8_0, Q4_K, Q5_K, Q6_K)");
  }
  return dec;
}

}  // namespace

bool can_dequantize(GgmlType type) { return decoder_for(type) != nullptr; }

void dequantize_blocks(GgmlType type, const uint8_t* src, float* dst, int64_t n, const std::string& what) {
  Decoder dec = checked_decoder(type, what);
  const GgmlTypeTraits& t = ggml_traits(type);
  TORCH_CHECK(n % t.block_size == 0, "dequantize_blocks: ", n, " is not a multiple of ", t.block_size);
  dec(src, dst, n / t.block_size);
}

at::Tensor dequantize_rows(GgmlType type, const uint8_t* src, int64_t rows, int64_t row_length,
                           const std::string& what) {
  Decoder dec = checked_decoder(type, what);
  const GgmlTypeTraits& t = ggml_traits(type);
  TORCH_CHECK(rows >= 0 && row_length >= 0 && row_length % t.block_size == 0, "dequantize_rows: bad geometry ", rows,
              " x ", row_length);
  at::Tensor out = at::empty({rows, row_length}, at::TensorOptions().dtype(at::kFloat));  // [rows, row_length]
  const int64_t nblocks = rows * (row_length / t.block_size);
  float* dst = out.data_ptr<float>();
  const int64_t block_size = t.block_size;
  const int64_t block_bytes = t.block_bytes;
  // About 256K elements (1 MB of output) per task: small tensors stay on one
  // thread, where waking the pool would cost more than it saves.
  const int64_t grain = std::max<int64_t>(1, 262144 / block_size);
  at::parallel_for(0, nblocks, grain, [&](int64_t begin, int64_t end) {
    dec(src + begin * block_bytes, dst + begin * block_size, end - begin);
  });
  return out;
}

}  // namespace nnsight
