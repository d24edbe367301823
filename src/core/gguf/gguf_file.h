// GgufFile: a GGUF (v2 or v3) file mapped read-only: its metadata, its tensor
// directory, and access to each tensor's bytes. Every length, count, offset
// and size in the file is checked against the file before it is trusted; a
// malformed file raises LoadError naming the file, the key or tensor, and
// what was wrong.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/gguf/ggml_type.h"
#include "core/gguf/gguf_value.h"
#include "core/mapped_file.h"

namespace nnsight {

struct GgufTensorInfo {
  std::string name;
  // GGUF order: dims[0] (ggml's ne[0]) is the innermost, contiguous one. A
  // PyTorch shape is this reversed.
  std::vector<int64_t> dims;
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
  int64_t numel = 0;

  // Elements of the innermost dimension: one "row".
  int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  // Rows of the tensor viewed as [rows, row_length].
  int64_t rows() const { return row_length() == 0 ? 0 : numel / row_length(); }
  // Bytes of one row (rows are whole blocks, ne[0] being a multiple of the block size).
  uint64_t row_bytes() const { return rows() == 0 ? 0 : nbytes / static_cast<uint64_t>(rows()); }
  std::vector<int64_t> torch_shape() const { return {dims.rbegin(), dims.rend()}; }
};

class GgufFile {
 public:
  // Default data-section alignment when general.alignment is absent.
  static constexpr uint64_t kDefaultAlignment = 32;
  // Deepest array nesting accepted in metadata.
  static constexpr int kMaxArrayDepth = 8;

  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // The mapping, for views of tensor data that outlive this object.
  const std::shared_ptr<const MappedFile>& mapping() const { return file_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // File offset where the tensor data section starts.
  uint64_t data_offset() const { return data_offset_; }

  // ---- metadata ----
  // Keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }
  bool has(const std::string& key) const { return metadata_.count(key) > 0; }
  const GgufValue* find(const std::string& key) const;
  // Throws LoadError("<file>: missing metadata key 'x'").
  const GgufValue& at(const std::string& key) const;
  // "<file>: metadata key 'x'", the `what` for GgufValue accessors.
  std::string describe_key(const std::string& key) const;

  // Typed getters: throw when the key is missing or has the wrong type.
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  // Same, with a fallback for a missing key (a present key of the wrong type still throws).
  std::string get_string_or(const std::string& key, const std::string& fallback) const;
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_float_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;

  // ---- tensors ----
  // In file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // Throws LoadError("<file>: no tensor 'x'").
  const GgufTensorInfo& tensor(const std::string& name) const;
  // The tensor's bytes inside the mapping (checked at open to lie inside the file).
  const uint8_t* tensor_data(const GgufTensorInfo& info) const;
  // Rows [row_start, row_start + row_count) of the tensor viewed as
  // [rows, row_length], dequantized: float32 [row_count, row_length].
  at::Tensor dequantize_rows(const GgufTensorInfo& info, int64_t row_start, int64_t row_count) const;
  // The whole tensor dequantized, float32 in PyTorch shape (reversed dims).
  at::Tensor dequantize(const GgufTensorInfo& info) const;

 private:
  void parse();

  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::string> keys_;
  std::unordered_map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace nnsight
