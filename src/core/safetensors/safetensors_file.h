// SafetensorsFile: a .safetensors file mapped read-only. The header (an
// 8-byte little-endian length, then JSON) is checked in full at open: every
// tensor's dtype, shape and data_offsets must agree and lie inside the data
// section, without overlaps. Errors are LoadError naming the file and tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"

namespace nnsight {

struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_name;  // "F32", "BF16", ...
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  uint64_t begin = 0;  // byte offsets in the data section
  uint64_t end = 0;
};

// The safetensors dtype name of a scalar type, or nullptr when the format
// (as supported here) cannot hold it.
const char* safetensors_dtype_name(at::ScalarType type);

class SafetensorsFile {
 public:
  // Largest header accepted: far above real files (a few hundred KB), far
  // below what would hurt to read.
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  explicit SafetensorsFile(const std::string& path);
  // A safetensors body held in memory; `name` stands for the file in messages.
  SafetensorsFile(const std::string& name, std::string bytes);

  const std::string& path() const { return file_->path(); }
  // The "__metadata__" string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In data-offset order.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const SafetensorsTensorInfo* find(const std::string& name) const;
  // Throws LoadError("<file>: no tensor 'x'").
  const SafetensorsTensorInfo& info(const std::string& name) const;

  // A fresh CPU tensor in the stored dtype.
  at::Tensor load(const std::string& name) const;
  // Rows [start, start + length) of dim 0, read without touching the others.
  at::Tensor load_rows(const std::string& name, int64_t start, int64_t length) const;

 private:
  void parse();

  std::shared_ptr<const MappedFile> file_;
  uint64_t data_offset_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace nnsight
