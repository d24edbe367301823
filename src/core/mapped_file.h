// MappedFile: a whole file mapped read-only (MAP_PRIVATE) for the weight
// readers, so tensor data is read straight from the page cache without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nnsight {

class MappedFile {
 public:
  // Throws LoadError naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  // Bytes already in memory (a safetensors body received over HTTP), named
  // `name` in messages; the object owns them.
  MappedFile(std::string name, std::string bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  // nullptr for an empty file.
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string owned_;  // the bytes of an in-memory file
  bool mapped_ = false;
};

}  // namespace nnsight
