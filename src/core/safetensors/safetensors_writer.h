// write_safetensors: saves named tensors (e.g. captured activations) in the
// safetensors format, readable by Python's `safetensors` and by SafetensorsFile.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace nnsight {

// Tensors may live on any device and be non-contiguous; they are copied to
// contiguous CPU memory. Dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8,
// BOOL. The file is written beside `path` and renamed into place, so a reader
// never sees half a file. Throws nnsight::Error for an unsupported dtype, a
// duplicate or reserved name ("__metadata__"), or an I/O failure.
// The same file's bytes, in memory (an HTTP response body).
std::string safetensors_bytes(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace nnsight
