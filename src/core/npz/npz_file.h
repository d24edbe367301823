// NpzFile: a NumPy .npz archive (a zip of .npy arrays, as np.savez writes
// it), read from a mapped file: Gemma Scope's SAEs ship as params.npz.
//
// Why by hand: no library in Debian reads .npy, and the zip layer here is
// only the directory walk (stored entries, zip64 included) over the mapped
// bytes; np.savez_compressed's deflated entries are refused with a message
// that says how to re-save them, rather than pulling in a zip library.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace nnsight {

struct NpyArrayInfo {
  std::string name;            // the array's name ("W_enc": the entry without ".npy")
  std::string descr;           // NumPy's dtype string ("<f4")
  std::vector<int64_t> shape;  // C order
  bool fortran_order = false;
  uint64_t data_offset = 0;  // of the array's bytes in the archive
  uint64_t data_bytes = 0;
};

class NpzFile {
 public:
  // Throws LoadError naming the file (and the entry) when it is not an
  // archive of stored .npy arrays this reader understands.
  explicit NpzFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::vector<NpyArrayInfo>& arrays() const { return arrays_; }
  // nullptr when the archive has no array of that name.
  const NpyArrayInfo* find(const std::string& name) const;
  // The array as a float32 tensor (a copy), in C order; float16, float32 and
  // float64 arrays, little-endian.
  at::Tensor load_float(const std::string& name) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  std::vector<NpyArrayInfo> arrays_;
  std::map<std::string, size_t> index_;
};

}  // namespace nnsight
